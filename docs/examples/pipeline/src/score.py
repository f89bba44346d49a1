"""Scores trips with a stand-in "model": tip = scale * (distance + minutes / 10). DataFrame in,
DataFrame out, as a ParallelRunStep tabular entry script."""
import argparse

import pandas as pd
from azureml_user.parallel_run import EntryScript

args = None


def init():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, required=True)
    parser.add_argument("--label", default="score")
    args, _ = parser.parse_known_args()
    EntryScript().logger.info("scale=%s label=%s", args.scale, args.label)


def run(mini_batch):
    out = pd.DataFrame({"trip_id": mini_batch["trip_id"]})
    out[args.label] = (args.scale * (mini_batch["distance_km"] + mini_batch["minutes"] / 10)).round(2)
    return out
