"""The bundled synthetic task families a ~3M-parameter model can learn: the short stdin/stdout
family (issue 8), its vocabulary of operations, and the long-answer variant (issue 19). It
imports only data/problem.py.
"""
