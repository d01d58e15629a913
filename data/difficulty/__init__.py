"""The difficulty filter's pure pipeline (`microcoder data filter`): measured pass rates in, a
predictor calibrated on metadata, the hard-but-solvable selection and its report out. The
measuring itself runs on a cluster (launch/jobs/). It may import data/problem.py, data/formats/
and data/corpus/; never launch/ or actors/.
"""
