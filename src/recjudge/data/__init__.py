"""Data in and out: TREC runs and qrels, collections, splits."""
