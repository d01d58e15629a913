import ast, sys, re
from pathlib import Path
ROOT = Path.cwd()  # run from the repository root
PKGS = ["microcoder","actors","bench","buffer","data","evaluation","launch","learner","sandbox"]
OTHERS = {"actors/generator.py","actors/learner_rank.py","actors/weight_pull.py","actors/weight_sync.py",
 "actors/relay_hub.py","actors/relay_member.py","data/config.py","data/prompting/reasoning.py","sandbox/extract.py"}
# the sandbox's own modules run inside the sandbox (a solution sees what they import): never hoist
KEEP = {"sandbox/forkserver.py", "sandbox/childproc.py", "sandbox/serverenv.py", "sandbox/frames.py"}
def owned_by_others(rel):
    # after merging h61/h62: drop everything after `rel in KEEP`
    return rel in KEEP
STD = set(sys.stdlib_module_names)
HEAVY_STD = {"asyncio","multiprocessing","sqlite3","ssl","http","email","xml","ctypes","unittest","concurrent","tkinter"}
LIGHT3 = {"msgpack","tomli_w","zmq","filelock","safetensors","tqdm","psutil"}
def heavy(e): return (e not in STD and e not in LIGHT3) or e in HEAVY_STD
def modname(f):
    rel = f.relative_to(ROOT)
    parts = list(rel.with_suffix("").parts)
    if parts[0] != "microcoder": parts = ["microcoder"] + parts
    if parts[-1] == "__init__": parts = parts[:-1]
    return ".".join(parts)
files = {}
for p in PKGS:
    for f in sorted((ROOT/p).rglob("*.py")):
        files[modname(f)] = f
def is_pkg(m): return files[m].name == "__init__.py"
def resolve(m, node):
    if isinstance(node, ast.ImportFrom) and node.level:
        base = m.split(".") if is_pkg(m) else m.split(".")[:-1]
        base = base[:len(base)-(node.level-1)]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module if isinstance(node, ast.ImportFrom) else None
def targets(m, node):
    """modules imported by node: own modules (full names) and external top names"""
    own, ext = set(), set()
    names = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        mod = resolve(m, node)
        names = [mod] + [mod + "." + a.name for a in node.names]
    for n in names:
        if n.startswith("microcoder"):
            parts = n.split(".")
            for i in range(1, len(parts)+1):
                c = ".".join(parts[:i])
                if c in files: own.add(c)
        else:
            ext.add(n.split(".")[0])
    return own, ext
def toplevel_imports(tree):
    out = []
    def rec(node, in_tc=False):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)): continue
            if isinstance(ch, ast.If) and "TYPE_CHECKING" in ast.unparse(ch.test):
                continue
            if isinstance(ch, (ast.Import, ast.ImportFrom)): out.append(ch)
            else: rec(ch)
    rec(tree)
    return out
trees = {m: ast.parse(f.read_text()) for m, f in files.items()}
def build():
    own_e, ext_e = {}, {}
    for m, t in trees.items():
        o, e = set(), set()
        for n in toplevel_imports(t):
            a, b = targets(m, n); o |= a; e |= b
        parts = m.split(".")
        for i in range(1, len(parts)):
            c = ".".join(parts[:i])
            if c in files: o.add(c)
        o.discard(m)
        own_e[m], ext_e[m] = o, e
    return own_e, ext_e
def closure(m, own_e):
    seen = {m}; st = [m]
    while st:
        x = st.pop()
        for y in own_e.get(x, ()):
            if y not in seen: seen.add(y); st.append(y)
    return seen
def ext_of(m, own_e, ext_e):
    s = set()
    for x in closure(m, own_e): s |= ext_e[x]
    return s
