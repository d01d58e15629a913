import ast, sys, re
sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from hoist import ROOT, PKGS, owned_by_others
WRITE = "--write" in sys.argv
def names_in(node):
    return {ast.unparse(x) for x in ast.walk(node) if isinstance(x, (ast.Name, ast.Attribute, ast.Subscript))}
tot = {"split":0, "dep":0, "others":0, "comment":0}
for p in PKGS:
    for f in sorted((ROOT/p).rglob("*.py")):
        rel = str(f.relative_to(ROOT)); src = f.read_text(); t = ast.parse(src)
        lines = src.splitlines(keepends=True)
        found = []
        for n in ast.walk(t):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], (ast.Tuple, ast.List)) and isinstance(n.value, (ast.Tuple, ast.List)):
                tg, vl = n.targets[0].elts, n.value.elts
                if len(tg) != len(vl) or any(isinstance(x, ast.Starred) for x in tg + vl): continue
                found.append(n)
        for n in sorted(found, key=lambda n: -n.lineno):
            tg, vl = n.targets[0].elts, n.value.elts
            if owned_by_others(rel): tot["others"] += 1; print("OTHERS", rel, n.lineno, ast.unparse(n)[:80]); continue
            tnames = {ast.unparse(x) for x in tg}
            # dependent if a value (after the first) reads a target assigned earlier, or any value reads any target
            def root(x):
                while isinstance(x, (ast.Attribute, ast.Subscript)): x = x.value
                return x.id if isinstance(x, ast.Name) else None
            dep = False
            for j, v in enumerate(vl):
                prev = tg[:j]
                if not prev: continue
                pn = {ast.unparse(x) for x in prev}
                roots = {root(x) for x in prev if not isinstance(x, ast.Name)} - {None}
                vn = names_in(v)
                if vn & pn: dep = True
                if any(ast.unparse(x).startswith(tuple(q + "." for q in pn) + tuple(q + "[" for q in pn)) for x in ast.walk(v) if isinstance(x, (ast.Attribute, ast.Subscript))): dep = True
                # a call on the root of an attribute/subscript target may read it
                for c in ast.walk(v):
                    if isinstance(c, ast.Call) and (roots & {root(c.func)} or any(isinstance(a, ast.Name) and a.id in roots for a in c.args)): dep = True
                # subscript target: any reference to its container
                if any(isinstance(x, ast.Subscript) for x in prev) and ({root(x) for x in prev if isinstance(x, ast.Subscript)} & {x.id for x in ast.walk(v) if isinstance(x, ast.Name)}): dep = True
            if dep: tot["dep"] += 1; print("DEP", rel, n.lineno, ast.unparse(n)[:100]); continue
            seg = "".join(lines[n.lineno-1:n.end_lineno])
            pre = lines[n.lineno-1][:n.col_offset]; post = lines[n.end_lineno-1][n.end_col_offset:]
            if pre.strip() or (post.strip() and not post.strip().startswith("#")) or ("#" in ast.get_source_segment(src, n) and n.lineno != n.end_lineno):
                tot["comment"] += 1; print("MANUAL", rel, n.lineno, ast.unparse(n)[:100]); continue
            ind = " " * n.col_offset
            out = []
            for a, b in zip(tg, vl):
                out.append(f"{ind}{ast.get_source_segment(src, a)} = {ast.get_source_segment(src, b)}\n")
            if post.strip(): out[-1] = out[-1].rstrip("\n") + "  " + post.strip() + "\n"
            tot["split"] += 1
            if WRITE: lines[n.lineno-1:n.end_lineno] = out
            else: print("SPLIT", rel, n.lineno, ast.unparse(n)[:100])
        if WRITE and found: f.write_text("".join(lines))
print(tot)
