"""The prelude LeetCode-style solutions and check scripts expect (our own code).

LeetCode's judge pre-imports typing and the standard containers and defines ListNode / TreeNode;
check scripts build arguments with `list_node([...])` / `tree_node([...])` (level order, `None`
for a missing child) and compare with `is_same_list` / `is_same_tree`.
"""

LEETCODE_PRELUDE = """\
import bisect, collections, datetime, functools, heapq, itertools, math, operator, random, re, string
from bisect import *
from collections import *
from functools import *
from heapq import *
from itertools import *
from math import *
from operator import *
from string import *
from typing import *

inf = float("inf")


class ListNode:
    def __init__(self, val=0, next=None):
        self.val, self.next = val, next


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val, self.left, self.right = val, left, right


def list_node(values):
    head = None
    for v in reversed(list(values)):
        head = ListNode(v, head)
    return head


def tree_node(values):
    values = list(values)
    if not values or values[0] is None:
        return None
    root = TreeNode(values[0])
    level, i = deque([root]), 1
    while level and i < len(values):
        node = level.popleft()
        for side in ("left", "right"):
            if i < len(values) and values[i] is not None:
                child = TreeNode(values[i])
                setattr(node, side, child)
                level.append(child)
            i += 1
    return root


def is_same_list(a, b):
    while a and b:
        if a.val != b.val:
            return False
        a, b = a.next, b.next
    return a is None and b is None


def is_same_tree(a, b):
    if a is None or b is None:
        return a is b
    return a.val == b.val and is_same_tree(a.left, b.left) and is_same_tree(a.right, b.right)
"""
