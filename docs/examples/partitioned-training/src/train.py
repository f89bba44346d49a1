"""Fits a least-squares trend (units ~ day) per store and product and saves it as JSON."""
import argparse
import json
import os

from azureml_user.parallel_run import EntryScript

args = None


def init():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", required=True)
    args, _ = parser.parse_known_args()
    os.makedirs(args.model_dir, exist_ok=True)


def run(mini_batch, mini_batch_context):
    key = mini_batch_context.partition_key_value  # {"store": "north", "product": "tea"}
    x, y = mini_batch["day"].astype(float), mini_batch["units"].astype(float)
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    model = {"partition": key, "rows": len(mini_batch), "slope": slope,
             "intercept": y.mean() - slope * x.mean()}
    name = "%s-%s.json" % (key["store"], key["product"])
    with open(os.path.join(args.model_dir, name), "w") as f:
        json.dump(model, f, indent=1)
    EntryScript().logger.info("trained %s on %d rows", name, len(mini_batch))
    return []
