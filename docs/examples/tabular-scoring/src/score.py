"""A pandas "model" stand-in: price = area * price_per_m2 * a city factor + 5000 per room."""
import argparse

import pandas as pd
from azureml_user.parallel_run import EntryScript

CITY_FACTOR = {"Lyon": 1.1, "Porto": 0.9, "Graz": 1.0, "Turku": 0.8}
args = None


def init():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--price_per_m2", type=float, default=3000.0)
    args, _ = parser.parse_known_args()
    EntryScript().logger.info("price_per_m2=%s", args.price_per_m2)


def run(mini_batch):
    factor = mini_batch["city"].map(CITY_FACTOR).fillna(1.0)
    price = mini_batch["area_m2"] * args.price_per_m2 * factor + 5000 * mini_batch["rooms"]
    return pd.DataFrame({"house_id": mini_batch["house_id"], "price": price.round(0).astype(int)})
