"""Scoring and meta-evaluation: measures, system rankings, agreement, ties, calibration."""
