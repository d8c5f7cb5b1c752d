"""WebGen-Bench evaluation: start sites, run UI test cases with GUI agents, grade appearance, score."""
