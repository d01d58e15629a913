import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from hoist import *
WRITE = "--write" in sys.argv
ONLY_OWN = "--own" in sys.argv
own_e, ext_e = build()
def bound(node):
    out = []
    for a in node.names:
        if isinstance(node, ast.Import):
            out.append(a.asname or a.name.split(".")[0])
        else:
            out.append(a.asname or a.name)
    return out
def key(m, node, name):
    # identity of what the name is bound to
    if isinstance(node, ast.Import):
        for a in node.names:
            if (a.asname or a.name.split(".")[0]) == name: return ("mod", a.name if a.asname else a.name.split(".")[0])
    for a in node.names:
        if (a.asname or a.name) == name: return ("from", resolve(m, node), a.name)
def lazies(tree):
    out = []
    def rec(node, func, anc):
        for ch in ast.iter_child_nodes(node):
            f2 = ch if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else func
            if isinstance(ch, (ast.Import, ast.ImportFrom)) and func is not None:
                out.append((ch, func, anc))
            rec(ch, f2, anc + [ch] if func is not None else anc)
    rec(tree, None, [])
    return out
HELP_FILE = "/tmp/help_before.txt"  # sys.modules after build_parser(), one a line, taken BEFORE hoisting
MISS=[]
HV=[]
HB=[]
PERF={}
CUR=[None]
HELP = {l.strip() for l in open(HELP_FILE) if l.startswith("microcoder")}
HELPTOP = {l.strip().split(".")[0] for l in open(HELP_FILE)}
PROTECTED = ["microcoder.launch.cli.main", "microcoder.learner.models.memory_plan", "microcoder.protocol"]
PROTECTED += [m for m in files if m.startswith("microcoder.launch.cli.cmd_")]
PROTECTED += re.findall(r'"(microcoder\.bench[\w.]*)"', (ROOT/"launch/cli/cmd_bench.py").read_text())
print(len(PROTECTED))
stats = {"moved":0,"skip":{}}
def skip(why):
    stats["skip"][why] = stats["skip"].get(why,0)+1
    PERF.setdefault(CUR[0],{}).setdefault(why,0); PERF[CUR[0]][why]+=1
remaining_others = 0
edits = {}
for m, f in files.items():
    rel = str(f.relative_to(ROOT))
    CUR[0]=rel
    t = trees[m]
    lz = lazies(t)
    if not lz: continue
    if owned_by_others(rel): remaining_others += len(lz); continue
    # module-level bindings
    top = {}
    for n in t.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): top.setdefault(n.name, []).append(("def",))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for b in bound(n): top.setdefault(b, []).append(key(m, n, b))
        else:
            for x in ast.walk(n):
                if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store): top.setdefault(x.id, []).append(("assign",))
                if isinstance(x, (ast.Import, ast.ImportFrom)):
                    for b in bound(x): top.setdefault(b, []).append(key(m, x, b))
    # lazy bindings across file
    lazyb = {}
    for n, func, anc in lz:
        for b in bound(n): lazyb.setdefault(b, set()).add(key(m, n, b))
    chosen = []
    for n, func, anc in lz:
        if isinstance(n, ast.ImportFrom) and n.module == "__future__": continue
        if any(isinstance(a, (ast.Try, ast.ExceptHandler)) or (isinstance(a, ast.If) and "TYPE_CHECKING" in ast.unparse(a.test)) for a in anc):
            skip("try/if"); continue
        O, E = targets(m, n)
        O.discard(m)
        own = bool(O) or (isinstance(n, ast.ImportFrom) and n.level > 0)
        if ONLY_OWN and not own: skip("not own"); continue
        mine = ext_of(m, own_e, ext_e)
        if 'torch' in mine: mine = mine | {'numpy'}
        prot = set().union(*(closure(r, own_e) for r in PROTECTED))
        hv = heavy if m in prot else (lambda e: e not in STD and e not in LIGHT3 and e != "pydantic")
        need = {e for e in E if hv(e)}
        for o in O: need |= {e for e in ext_of(o, own_e, ext_e) if hv(e)}
        if m in HELP:
            cl = set().union(*(closure(o, own_e) for o in O)) if O else set()
            if not cl <= HELP or not all((e in HELPTOP) or (e in STD and e not in HEAVY_STD) for e in E):
                bad = sorted(cl - HELP) + [e for e in E if not ((e in HELPTOP) or (e in STD and e not in HEAVY_STD))]
                HB.append((ast.unparse(n)[:70], tuple(bad[:3]))); skip("help"); continue
        if not need <= mine:
            HV.append((rel, ast.unparse(n)[:60], tuple(sorted(need-mine)))); skip("heavy" + (" own" if own else "")); MISS.append(tuple(sorted(need - mine))); continue
        if any(m in closure(o, own_e) for o in O): skip("cycle"); continue
        ok = True
        for b in bound(n):
            k = key(m, n, b)
            if any(x != k for x in top.get(b, [])): ok = False; break
            if len(lazyb[b]) > 1: ok = False; break
            # name rebound in the function (params, stores)
            args = func.args
            params = {a.arg for a in args.args + args.kwonlyargs + args.posonlyargs} | ({args.vararg.arg} if args.vararg else set()) | ({args.kwarg.arg} if args.kwarg else set())
            if b in params: ok = False; break
            for x in ast.walk(func):
                if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store) and x.id == b: ok = False
                if isinstance(x, (ast.Import, ast.ImportFrom)) and x is not n and b in bound(x) and key(m, x, b) != k: ok = False
                if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and x.name == b: ok = False
                if isinstance(x, ast.Global) or isinstance(x, ast.Nonlocal):
                    if b in x.names: ok = False
            if not ok: break
        if not ok: skip("name"); continue
        chosen.append(n)
        own_e[m] |= O; ext_e[m] |= E
    if chosen:
        edits[rel] = chosen
        stats["moved"] += len(chosen)
print(stats, "in others' files:", remaining_others)
if WRITE:
    for rel, nodes in edits.items():
        f = ROOT / rel
        lines = f.read_text().splitlines(keepends=True)
        t = ast.parse("".join(lines))
        # map by position
        pos = {(n.lineno, n.col_offset) for n in nodes}
        # find parent block for 'pass' insertion
        parent_of = {}
        for p in ast.walk(t):
            for field in ("body", "orelse", "finalbody"):
                blk = getattr(p, field, None)
                if isinstance(blk, list):
                    for s in blk: parent_of[id(s)] = blk
        real = [n for n in ast.walk(t) if isinstance(n, (ast.Import, ast.ImportFrom)) and (n.lineno, n.col_offset) in pos]
        texts = []
        kill = {}
        FIRST = []
        for n in real:
            texts.append(ast.unparse(n))
            blk = parent_of[id(n)]
            rest = [s for s in blk if (s.lineno, s.col_offset) not in pos]
            first = lines[n.lineno-1]
            assert first[:n.col_offset].strip() == "" and lines[n.end_lineno-1][n.end_col_offset:].strip() in ("",) or lines[n.end_lineno-1][n.end_col_offset:].strip().startswith("#"), (rel, n.lineno)
            for i in range(n.lineno-1, n.end_lineno): kill[i] = None
            if not rest and blk[0] is n:
                kill[n.lineno-1] = " " * n.col_offset + "pass\n"
            idx = blk.index(n)
            if all((s.lineno, s.col_offset) in pos for s in blk[:idx]) and rest:
                j = n.end_lineno
                while j < len(lines) and lines[j].strip() == "" and j not in kill:
                    FIRST.append((rel, j)); j += 1
        for _, j in FIRST: kill[j] = None
        new = []
        for i, l in enumerate(lines):
            if i in kill:
                if kill[i]: new.append(kill[i])
            else: new.append(l)
        topimps = [n for n in t.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        if topimps: at = topimps[0].end_lineno
        elif t.body and isinstance(t.body[0], ast.Expr) and isinstance(t.body[0].value, ast.Constant): at = t.body[0].end_lineno
        else: at = 0
        # 'at' counts lines before any kill (kills are all in functions, after the top)
        ins = "".join(x + "\n" for x in texts)
        if not topimps: ins = "\n" + ins
        new = new[:at] + [ins] + new[at:]
        f.write_text("".join(new))
    print("written", len(edits), "files")
import collections; print(collections.Counter(MISS).most_common(30))

for k,v in sorted(PERF.items(), key=lambda x:-sum(x[1].values()))[:40]: print(sum(v.values()), k, v)

import collections
for k,v in collections.Counter(x[0] for x in HB).most_common(60): print(v,k)

for x in HV: print("HV", *x)
