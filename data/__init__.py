"""Problem records, loaders for public formats, the synthetic task family."""
