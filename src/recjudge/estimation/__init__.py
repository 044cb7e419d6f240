"""Prediction-powered estimates: system means under human labels from a few human-judged users and
LLM labels on many, with intervals, rank sets and how many human labels to buy (``recjudge estimate``)."""
