"""Rewards beside the code judge: the plug-in hook (`executor.reward = "module:function"`,
plugin.py) and the `answer` kind's exact-answer reward (answer.py), which runs nothing. It may
import data/problem.py and the sandbox's verdict record; never the pool or the fork servers.
"""
