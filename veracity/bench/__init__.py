"""Benchmark harness: dataset loaders (``datasets``), metrics (``metrics``), runs and reports.

``from veracity.bench.datasets import load_dataset, DATASETS`` reads a public benchmark in its official
file layout; ``from veracity.bench.metrics import evaluate, efficiency_summary`` scores predictions.
"""
