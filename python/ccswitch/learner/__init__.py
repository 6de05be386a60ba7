"""The learner's Python side: datasets from sweeps and runs (`dataset`), labels and regret
(`labels`), the model export. See learner/README.md for the contracts between them."""
