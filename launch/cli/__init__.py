"""The `microcoder` command line: the argparse front (main.py) and one thin module per command
(`cmd_*.py`: parse, then import the heavy code inside the command). A command module may import
any room of launch/ and the rooms below launch/; no other room imports cli/ (the argument
helpers they share are launch/cliargs.py).
"""
