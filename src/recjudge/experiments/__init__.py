"""Whole experiments built from the stages: ablations and the demo."""
