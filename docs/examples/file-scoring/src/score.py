"""Counts the words (of at least --min_length letters) in each file of a mini-batch.

The ParallelRunStep entry-script contract: init() once per worker process, run(mini_batch)
per mini-batch returning one row per file.
"""
import argparse
import os

from azureml_user.parallel_run import EntryScript

min_length = 1
logger = None


def init():
    global min_length, logger
    parser = argparse.ArgumentParser()
    parser.add_argument("--min_length", type=int, default=1)
    args, _unknown = parser.parse_known_args()
    min_length = args.min_length
    logger = EntryScript().logger
    logger.info("init: counting words of at least %d letters", min_length)


def run(mini_batch):
    rows = []
    for path in mini_batch:
        with open(path, encoding="utf-8") as f:
            words = [w for w in f.read().split() if len(w) >= min_length]
        rows.append(f"{os.path.basename(path)} {len(words)}")
    return rows
