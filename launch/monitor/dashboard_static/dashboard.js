// microcoder live dashboard: polls /api/metrics?since=N and /api/status, draws plain SVG charts.
// No libraries, no network beyond this server. Every series path carries data-points (the number
// of points drawn) so headless tests can check that the charts hold data.
"use strict";

const POLL_MS = Number(new URLSearchParams(location.search).get("poll")) || 2000;
const COLORS = ["#2563eb", "#16a34a", "#ea580c", "#9333ea", "#0891b2", "#db2777", "#ca8a04",
  "#475569", "#dc2626", "#65a30d"];
const VERDICT_ORDER = ["AC", "WA", "TLE", "MLE", "OLE", "RE", "CE", "SE", "unfinished", "no_code"];
// Bins of `group_pass_hist`: a group's pass rate in [0], (0,.25], (.25,.5], (.5,.75], (.75,1), [1].
const PASS_BINS = ["0", "≤¼", "≤½", "≤¾", "<1", "1"];
const GIB = 2 ** 30;  // charts with `scale` plot value / scale (bytes as GiB)
const CHARTS = [
  { id: "tokens", title: "Tokens per second", unit: "tok/s",
    series: [["gen_tokens_per_s", "generated"], ["tokens_per_s", "trained"]] },
  { id: "tests", title: "Tests judged per second", unit: "tests/s", series: [["tests_per_s", "judged"]] },
  { id: "buffer", title: "Buffer depths", unit: "groups",
    series: [["buffer.depths.leased", "generating"], ["buffer.depths.unscored", "unscored"],
             ["buffer.depths.scoring", "scoring"], ["buffer.depths.scored", "ready for learner"]] },
  { id: "hist", title: "Staleness of consumed groups", unit: "groups", bars: stalenessBars },
  { id: "staleness", title: "Staleness per step", unit: "versions",
    series: [["staleness_mean", "mean"], ["staleness_max", "max"]] },
  { id: "idle", title: "Idle fraction per pool", unit: "%", pct: true, ymax: 1,
    series: [["generator_idle_frac", "generators"], ["executor_idle_frac", "executors"],
             ["learner_idle_frac", "learner (waiting)"]] },
  { id: "reward", title: "Reward / pass rate", unit: "fraction",
    series: [["reward_mean", "batch reward"], ["pass_rate", "pass rate"],
             ["heldout_pass_rate", "held-out pass rate", "evals"],
             ["heldout_greedy_pass_rate", "held-out greedy", "evals"]] },
  { id: "temperature", title: "Temperature and diversity", unit: "",
    series: [["temperature", "temperature"], ["diversity", "diversity"]] },
  { id: "length", title: "Response length", unit: "tokens",
    series: [["response_len_mean", "mean (trained)"], ["response_len_p50", "p50"],
             ["response_len_p90", "p90"], ["response_len_max", "max"]] },
  { id: "verdicts", title: "Verdicts per step", unit: "% of responses", pct: true, ymax: 1,
    empty: "no verdicts recorded", series: () => nestedSeries("verdict_rates.", "", verdictRank),
    note: verdictNote },
  { id: "components", title: "Reward components", unit: "mean per response",
    empty: "no reward components recorded", series: () => nestedSeries("reward_components.", "", () => 0),
    note: rewardNote },
  { id: "sources", title: "Data sources: share of the step's groups", unit: "%", pct: true, ymax: 1,
    empty: "no data sources recorded", series: () => nestedSeries("data.", ".share", () => 0, true),
    note: sourceNote },
  { id: "passhist", title: "Group pass rates (newest step)", unit: "groups", bars: passHistBars },
  // Multi-turn runs (environment.kind): pass rate at each turn, turns and feedback per trajectory.
  { id: "turns", title: "Multi-turn: pass rate at each turn", unit: "%", pct: true, ymax: 1,
    empty: "single-turn run (no turns recorded)", note: turnsNote,
    series: () => nestedSeries("turn_pass.", "", (k) => parseInt(k, 10)).map(([k, t]) => [k, "turn " + t]) },
  { id: "truncation", title: "Truncated, looping and masked responses", unit: "%", pct: true,
    ymax: 1, series: [["truncated_frac", "truncated"], ["looping_frac", "looping"],
                      ["masked_frac", "advantage masked"]] },
  { id: "mismatch", title: "Token ratio π_learner / π_behaviour", unit: "quantiles", nozero: true,
    empty: "no mismatch recorded", note: mismatchNote,
    series: [["mismatch_ratio_p1", "p1"], ["mismatch_ratio_p50", "p50"], ["mismatch_ratio_p99", "p99"]] },
  { id: "mismatch-kl", title: "Mismatch KL (k3) by staleness", unit: "nats", empty: "no mismatch recorded",
    series: () => [["mismatch_kl", "all"], ...nestedSeries("mismatch_by_staleness.", ".kl", (b) => parseInt(b, 10))
      .map(([k, b]) => [k, "staleness " + b])] },
  { id: "loss", title: "Loss", unit: "", series: [["loss", "policy loss"]] },
  { id: "clip", title: "Clip fraction", unit: "%", pct: true, series: [["clip_frac", "clipped tokens"]] },
  { id: "sync", title: "Weight-sync time", unit: "s", series: [["sync_s", "broadcast"]] },
  { id: "steptime", title: "Learner step time", unit: "s",
    series: [["wait_s", "waiting for data"], ["compute_s", "compute"], ["sync_s", "sync"]] },
  // Memory per actor (issue 49; launch/monitor/memory_view.py): one chart per pool.
  { id: "mem-generator", title: "Memory: generators (with their engines)", unit: "GiB", scale: GIB,
    empty: "no memory reported", series: () => memorySeries("generator",
      [["rss_bytes", "RSS"], ["device_allocated_bytes", "device allocated"]]) },
  { id: "mem-eval-generator", title: "Memory: generators set aside for the eval", unit: "GiB", scale: GIB,
    empty: "no eval generators (eval.generators = 0)", series: () => memorySeries("eval-generator",
      [["rss_bytes", "RSS"], ["device_allocated_bytes", "device allocated"]]) },
  { id: "mem-executor", title: "Memory: executors (with their sandboxes)", unit: "GiB", scale: GIB,
    empty: "no memory reported", series: () => memorySeries("executor", [["rss_bytes", "RSS"]]) },
  { id: "mem-learner", title: "Memory: learner ranks", unit: "GiB", scale: GIB,
    empty: "no memory reported", series: () => memorySeries("learner",
      [["rss_bytes", "RSS"], ["device_allocated_bytes", "allocated"], ["device_reserved_bytes", "reserved"],
       ["device_peak_bytes", "peak"]]) },
  { id: "mem-buffer", title: "Memory: buffer", unit: "GiB", scale: GIB, empty: "no memory reported",
    series: () => memorySeries("buffer", [["rss_bytes", "RSS"]]) },
  { id: "kv-cache", title: "Generator KV cache in use", unit: "%", pct: true, ymax: 1,
    empty: "no KV-cache usage reported", series: () => memorySeries("generator", [["kv_cache_peak", "peak in 30 s"], ["kv_cache_usage", "now"]]) },
];
const W = 340, H = 150, PL = 44, PR = 10, PT = 8, PB = 18;
const NS = "http://www.w3.org/2000/svg";
const data = { steps: [], evals: [], events: [], hist: {}, passHist: null, next: 0, temperature: null };
let status = null;

const $ = (id) => document.getElementById(id);
function el(tag, attrs = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function fmt(v, pct) {
  if (typeof v !== "number" || !isFinite(v)) return "–";
  if (pct) return (100 * v).toFixed(Math.abs(v) < 0.1 ? 1 : 0) + "%";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2);
  return a === 0 ? "0" : v.toPrecision(3);
}
function fmtAxis(v, pct) {  // 3 significant digits, no trailing zeros
  if (pct) return fmt(v, true);
  const a = Math.abs(v);
  return a >= 1e4 ? fmt(v) : String(Number(v.toPrecision(a < 0.1 ? 2 : 3)));
}
function ago(t) {
  if (!t) return "–";
  const s = Math.max(0, Date.now() / 1000 - t);
  return s < 120 ? s.toFixed(0) + " s ago" : (s / 60).toFixed(0) + " min ago";
}

function buildCards() {
  const grid = $("charts");
  for (const c of CHARTS) {
    const card = el("div", { class: "card", id: "chart-" + c.id });
    const h = el("h2", {}, c.title);
    if (c.unit) h.appendChild(el("span", { class: "unit" }, "(" + c.unit + ")"));
    card.append(h, el("div", { class: "legend" }),
      el("svg:svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", "data-points": "0" }));
    if (c.note) card.appendChild(el("div", { class: "pool-note note" }));
    grid.appendChild(card);
  }
}

function points(key, source) {
  const out = [];
  for (const r of data[source || "steps"]) {
    if (typeof r[key] === "number" && typeof r.step === "number") out.push([r.step, r[key]]);
  }
  return out;
}

// Series of a nested field seen in any step, e.g. nestedSeries("verdict_rates.", "") ->
// [["verdict_rates.AC", "AC"], ...], ordered by rank(name) (then by name).
// `dotted`: a name may hold dots (a data source named after a file such as "set-v0.3.1").
function nestedSeries(prefix, suffix, rank, dotted = false) {
  const names = new Set();
  for (const r of data.steps) {
    for (const k of Object.keys(r)) {
      if (k.startsWith(prefix) && k.endsWith(suffix) && k.length > prefix.length + suffix.length) {
        const name = k.slice(prefix.length, k.length - suffix.length);
        if (dotted || !name.includes(".")) names.add(name);
      }
    }
  }
  return [...names].sort((a, b) => (rank(a) - rank(b)) || (a < b ? -1 : a > b ? 1 : 0))
    .map((name) => [prefix + name + suffix, name]);
}
// A pool's memory series: per actor (memory.<pool>.<actor>.<figure>), each figure asked for.
function memorySeries(pool, figures) {
  const actorRank = (a) => parseInt(a.split("-").pop(), 10) || 0;
  return figures.flatMap(([figure, label]) => nestedSeries(`memory.${pool}.`, "." + figure, actorRank)
    .map(([key, actor]) => [key, label ? `${actor} ${label}` : actor]));
}
function verdictRank(v) { const i = VERDICT_ORDER.indexOf(v); return i < 0 ? VERDICT_ORDER.length : i; }

// The notes under a chart: the newest step's counts. A span carries data-* for the tests.
function verdictNote(last) {
  const counts = nestedSeries("verdict_counts.", "", verdictRank).map(([k, v]) => `${v} ${fmt(last[k])}`);
  const out = [];
  if (counts.length) out.push(el("span", { "data-verdict-counts": String(counts.length) }, "newest step: " + counts.join(" · ")));
  if (typeof last.extraction_failed === "number") {
    out.push(el("span", { "data-extraction-failed": String(last.extraction_failed) },
      ` · extraction failed ${fmt(last.extraction_failed)}`));
  }
  return out;
}
// The reward function's errors (executor.reward raised: its group failed), a run total.
function rewardNote(last) {
  if (typeof last.reward_errors !== "number") return [];
  return [el("span", { class: last.reward_errors > 0 ? "err" : "", "data-reward-errors": String(last.reward_errors) },
    `reward function errors (groups failed, run total): ${fmt(last.reward_errors)}`)];
}
// The newest step per data source (data.sources): share of groups, mean reward, pass rate.
function sourceNote(last) {
  const names = nestedSeries("data.", ".share", () => 0, true).map(([, name]) => name);
  if (!names.length) return [];
  const table = el("table", { class: "sources", "data-sources": String(names.length) });
  const head = el("tr");
  for (const h of ["source", "share", "reward", "pass rate"]) head.appendChild(el("th", {}, h));
  table.appendChild(head);
  for (const name of names) {
    const row = el("tr", { "data-source": name });
    row.append(el("td", {}, name), el("td", {}, fmt(last[`data.${name}.share`], true)),
      el("td", {}, fmt(last[`data.${name}.reward`])), el("td", {}, fmt(last[`data.${name}.pass_rate`], true)));
    table.appendChild(row);
  }
  return [table];
}
// The newest step's turns and feedback tokens per trajectory (multi-turn runs only).
function turnsNote(last) {
  if (typeof last.turns_mean !== "number") return [];
  return [el("span", { "data-turns-mean": String(last.turns_mean) },
    `newest step: ${fmt(last.turns_mean)} turns and ${fmt(last.feedback_tokens_mean)} feedback tokens per trajectory`)];
}
function mismatchNote(last) {
  const out = [];
  if (typeof last.mismatch_out_of_band_frac === "number") {
    out.push(`out of band ${fmt(last.mismatch_out_of_band_frac, true)} · |Δ log p| ${fmt(last.mismatch_abs_dlogp)}`);
  }
  // The non-finite log-prob guard: responses dropped over the run, shown only when some were.
  const total = (k) => data.steps.reduce((a, r) => a + (typeof r[k] === "number" ? r[k] : 0), 0);
  const behaviour = total("nonfinite_dropped"), learner = total("nonfinite_learner_dropped");
  if (behaviour + learner > 0) {
    out.push(el("span", { class: "err", "data-nonfinite": String(behaviour + learner) },
      ` · non-finite log-probs dropped: ${fmt(behaviour)} at intake, ${fmt(learner)} in the learner (run total)`));
  }
  return out;
}

function axes(svg, lo, hi, x0, x1, pct) {
  for (const f of [0, 0.5, 1]) {
    const y = PT + (1 - f) * (H - PT - PB);
    svg.appendChild(el("svg:line", { class: "grid-line", x1: PL, x2: W - PR, y1: y, y2: y }));
    svg.appendChild(el("svg:text", { x: PL - 4, y: y + 3, "text-anchor": "end" }, fmtAxis(lo + f * (hi - lo), pct)));
  }
  svg.appendChild(el("svg:text", { x: PL, y: H - 4 }, "step " + x0));
  svg.appendChild(el("svg:text", { x: W - PR, y: H - 4, "text-anchor": "end" }, "step " + x1));
}

function drawLines(c, card) {
  const svg = card.querySelector("svg"), legend = card.querySelector(".legend");
  svg.replaceChildren(); legend.replaceChildren();
  const spec = typeof c.series === "function" ? c.series() : c.series;
  const scaled = (pts) => (c.scale ? pts.map(([x, y]) => [x, y / c.scale]) : pts);
  const series = spec.map(([key, label, src], i) => ({ key, label, color: COLORS[i % COLORS.length], pts: scaled(points(key, src)) }))
    .filter((s) => s.pts.length > 0);
  const all = series.flatMap((s) => s.pts);
  svg.setAttribute("data-points", String(all.length));
  const note = card.querySelector(".note"), last = data.steps[data.steps.length - 1];
  if (note) note.replaceChildren(...(last ? c.note(last) : []));
  if (!all.length) {
    const empty = data.steps.length && c.empty ? c.empty : "waiting for data…";
    svg.appendChild(el("svg:text", { class: "empty", x: W / 2, y: H / 2, "text-anchor": "middle" }, empty));
    return;
  }
  let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
  const ys = all.map((p) => p[1]);
  let lo = c.nozero ? Math.min(...ys) : Math.min(0, ...ys), hi = Math.max(...ys);
  if (c.ymax !== undefined) hi = Math.max(hi, c.ymax);
  if (hi <= lo) hi = lo + (c.nozero ? Math.max(Math.abs(lo) * 0.01, 1e-6) : 1);
  if (c.nozero) lo -= (hi - lo) * 0.05;
  hi += (hi - lo) * 0.05;
  const X = (x) => PL + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (W - PL - PR);
  const Y = (y) => PT + (1 - (y - lo) / (hi - lo)) * (H - PT - PB);
  axes(svg, lo, hi, x0, x1, c.pct);
  for (const s of series) {
    const d = s.pts.map((p, i) => (i ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1)).join("");
    svg.appendChild(el("svg:path", { class: "series", d, stroke: s.color, "data-series": s.key,
      "data-points": String(s.pts.length), "vector-effect": "non-scaling-stroke" }));
    const shown = s.pts.length <= 40 ? s.pts : [s.pts[s.pts.length - 1]];
    for (const p of shown) {
      svg.appendChild(el("svg:circle", { cx: X(p[0]), cy: Y(p[1]), r: 2.2, fill: s.color }));
    }
    const item = el("span");
    item.append(el("span", { class: "dot", style: "background:" + s.color }), s.label + " ",
      el("b", {}, fmt(s.pts[s.pts.length - 1][1], c.pct)));
    legend.appendChild(item);
  }
}

// Bar charts: c.bars() gives {keys, counts, attr (data-* of each bar), legend, empty}.
function stalenessBars() {
  const keys = Object.keys(data.hist).sort((a, b) => a - b);
  return { keys, counts: keys.map((k) => data.hist[k]), attr: "data-staleness",
    legend: "versions behind · total ", empty: "no group consumed yet" };
}
function passHistBars() {
  const h = Array.isArray(data.passHist) && data.passHist.length === PASS_BINS.length ? data.passHist : [];
  return { keys: h.length ? PASS_BINS : [], counts: h, attr: "data-pass-bin",
    legend: "groups by pass rate · total ", empty: data.steps.length ? "no verdicts recorded" : "waiting for data…" };
}

function drawBars(c, card) {
  const svg = card.querySelector("svg"), legend = card.querySelector(".legend");
  svg.replaceChildren(); legend.replaceChildren();
  const { keys, counts, attr, legend: words, empty } = c.bars();
  const total = counts.reduce((a, b) => a + b, 0);
  svg.setAttribute("data-points", String(keys.length));
  svg.setAttribute("data-total", String(total));
  if (!keys.length) {
    svg.appendChild(el("svg:text", { class: "empty", x: W / 2, y: H / 2, "text-anchor": "middle" }, empty));
    return;
  }
  const hi = Math.max(1, ...counts) * 1.05, bw = (W - PL - PR) / keys.length;
  axes(svg, 0, hi, "", "", false);
  svg.lastChild.remove(); svg.lastChild.remove();  // no step labels on a histogram
  keys.forEach((k, i) => {
    const h = (counts[i] / hi) * (H - PT - PB), x = PL + i * bw + bw * 0.15;
    svg.appendChild(el("svg:rect", { x, y: H - PB - h, width: bw * 0.7, height: h, rx: 2, fill: COLORS[0],
      [attr]: k, "data-count": String(counts[i]) }));
    svg.appendChild(el("svg:text", { x: x + bw * 0.35, y: H - 4, "text-anchor": "middle" }, k));
  });
  legend.append(words, el("b", {}, String(total)));
}

function render() {
  for (const c of CHARTS) (c.bars ? drawBars : drawLines)(c, $("chart-" + c.id));
  renderTemperature();
  document.body.dataset.next = String(data.next);
  document.body.dataset.steps = String(data.steps.length);
  const last = data.steps[data.steps.length - 1];
  if (last) {
    $("gen-rate").textContent = fmt(last.gen_tokens_per_s) + " tok/s";
    $("train-rate").textContent = fmt(last.tokens_per_s) + " tok/s";
    $("test-rate").textContent = fmt(last.tests_per_s) + " tests/s";
  }
}

// The temperature card: the calibration table (data-calibration rows), the chosen and current T,
// and every schedule stage / monitor step-up (data-temperature-change items).
function renderTemperature() {
  const box = $("temperature"), t = data.temperature;
  if (!box) return;
  box.replaceChildren();
  if (!t) { box.append(el("div", { class: "pool-note" }, "–")); return; }
  const c = t.calibration;
  const head = [`now T = ${t.current == null ? "–" : String(t.current)}`];
  if (c) head.push(`calibrated ${c.chosen} (target diversity ${Number(c.target).toFixed(3)}, ` +
    `${fmt(c.calibration_s)} s)`);
  else head.push("not calibrated");
  box.append(el("div", { class: "temperature-head", "data-chosen": c ? String(c.chosen) : "" }, head.join(" · ")));
  if (c && c.table) {
    const tab = el("table", { class: "replicas" }), hr = el("tr");
    for (const h of ["T", "probe diversity", ""]) hr.appendChild(el("th", {}, h));
    tab.appendChild(hr);
    for (const [temp, div] of c.table) {
      const tr = el("tr", { "data-calibration": String(temp) });
      const chosen = temp === c.chosen;
      tr.append(el("td", {}, String(temp)), el("td", {}, Number(div).toFixed(3)),
        el("td", { class: chosen ? "chosen" : "" }, chosen ? "← chosen" : (div >= c.target ? "reaches target" : "")));
      tab.appendChild(tr);
    }
    box.appendChild(tab);
    if (!c.reached_target) box.append(el("div", { class: "err" }, "no candidate reached the target: using the highest"));
  }
  const ul = el("ul", { class: "events" });
  for (const ch of t.changes || []) ul.appendChild(el("li", { "data-temperature-change": ch.cause }, `${ch.cause}: ${ch.message}`));
  if (ul.children.length) box.appendChild(ul);
}

function addSteps(steps) {
  for (const r of steps) {  // a resumed run repeats steps after its checkpoint: keep the newest
    while (data.steps.length && data.steps[data.steps.length - 1].step >= r.step) data.steps.pop();
    data.steps.push(r);
  }
}

async function pollMetrics() {
  try {
    const res = await fetch("/api/metrics?since=" + data.next, { cache: "no-store" });
    const m = await res.json();
    addSteps(m.steps); data.evals.push(...m.evals); data.events.push(...m.events);
    data.hist = m.staleness_hist; data.next = m.next; data.temperature = m.temperature || null;
    data.passHist = m.group_pass_hist || null;
    render();
    if (m.next < m.total) return setTimeout(pollMetrics, 0);
  } catch (err) {
    setState("unreachable");
  }
  setTimeout(pollMetrics, POLL_MS);
}

function setState(state) {
  const b = $("state"), word = (state || "unknown").split(" ")[0];
  b.textContent = word; b.className = "badge " + word;
  b.title = state || "";
}

function poolCard(kind, pool, idle) {
  const unit = kind === "generator" ? "tok/s" : "tests/s";
  const card = el("div", { class: "card", "data-pool": kind });
  const head = el("div", { class: "pool-head" });
  head.append(el("h2", {}, `${kind}s · ${pool.count}`), el("span", { class: "idle" }, "idle " + fmt(idle, true)));
  card.appendChild(head);
  if (kind === "learner") {
    const l = status.learning || {}, r = status.rates || {};
    card.appendChild(el("div", { class: "pool-note" }, `${pool.count} rank(s) · step ${fmt(r.step_s)} s · ` +
      `weight sync ${fmt(l.sync_s)} s · trained ${fmt(r.train_tokens_per_s)} tok/s`));
  }
  if (!pool.replicas.length) return card;
  const t = el("table", { class: "replicas" }), hr = el("tr");
  for (const h of ["replica", unit + " busy", "idle", "restarts", "version"]) hr.appendChild(el("th", {}, h));
  t.appendChild(hr);
  for (const r of pool.replicas) {
    const tr = el("tr");
    if (r.error) {
      tr.append(el("td", {}, r.name), el("td", { class: "err", colspan: 4 }, r.error));
    } else {
      for (const v of [r.name, fmt(r.rate), fmt(r.idle_frac, true), String(r.restarts), r.version ?? "–"]) {
        tr.appendChild(el("td", {}, String(v)));
      }
    }
    t.appendChild(tr);
  }
  card.appendChild(t);
  return card;
}

// The generators set aside for the eval (eval.generators > 0; launch/monitor/status_view.py
// eval_pool_section): its state, the step and policy version it evaluates at, a row per replica.
function evalPoolCards(pool) {
  if (!pool) return [];
  const card = el("div", { class: "card", "data-pool": "eval-generator", "data-eval-state": pool.state });
  const head = el("div", { class: "pool-head" });
  head.append(el("h2", {}, `eval generators · ${pool.count}`), el("span", { class: "idle" }, pool.state));
  card.appendChild(head);
  const at = pool.state === "evaluating" ? "evaluating" : "last evaluated";
  card.appendChild(el("div", { class: "pool-note", "data-eval-version": String(pool.version ?? "") },
    pool.version === null || pool.version === undefined ? "no eval yet"
      : `${at} step ${pool.step} at policy version ${pool.version} (${ago(pool.since)})`));
  if (!pool.replicas.length) return [card];
  const t = el("table", { class: "replicas" }), hr = el("tr");
  for (const h of ["replica", "state", "restarts", "version"]) hr.appendChild(el("th", {}, h));
  t.appendChild(hr);
  for (const r of pool.replicas) {
    const tr = el("tr");
    if (r.error) tr.append(el("td", {}, r.name), el("td", { class: "err", colspan: 3 }, r.error));
    else for (const v of [r.name, r.state, String(r.restarts), r.version ?? "–"]) tr.appendChild(el("td", {}, String(v)));
    t.appendChild(tr);
  }
  card.appendChild(t);
  return [card];
}

function renderStatus() {
  const s = status;
  $("run-name").textContent = s.run || "run";
  document.title = `${s.run} · step ${s.step} · microcoder`;
  setState(s.state);
  $("step").textContent = s.max_steps ? `${s.step} / ${s.max_steps}` : String(s.step);
  $("version").textContent = String(s.version);
  $("updated").textContent = ago(s.updated);
  $("pools").replaceChildren(...["generator", "executor", "learner"].map((k) => poolCard(k, s.pools[k], s.idle[k])),
    ...evalPoolCards(s.pools["eval-generator"]));
  const b = s.buffer, acc = $("accounting");
  acc.replaceChildren();
  const inv = b.invariant_ok === true ? "ok" : b.invariant_ok === false ? "VIOLATED" : "–";
  for (const [k, v] of [["issued", b.issued], ["consumed", b.consumed], ["dropped stale", b.dropped_stale],
    ["failed", b.failed], ["in flight", b.in_flight], ["admission capacity", b.admission_capacity],
    ["max staleness", s.staleness.max_allowed], ["invariant", inv]]) {
    acc.append(el("span", { class: "k" }, k), el("span", { class: inv === "VIOLATED" && k === "invariant" ? "err" : "" }, String(v ?? "–")));
  }
  const ul = $("events");
  ul.replaceChildren();
  for (const e of s.errors || []) ul.appendChild(el("li", { class: "error" }, e));
  for (const e of data.events.slice(-15).reverse()) {
    const prefix = typeof e.step === "number" && !e.text.startsWith("step ") ? `step ${e.step}: ` : "";
    ul.appendChild(el("li", {}, prefix + e.text));
  }
  if (!ul.children.length) ul.appendChild(el("li", {}, "none"));
}

async function pollStatus() {
  try {
    const res = await fetch("/api/status", { cache: "no-store" });
    status = await res.json();
    renderStatus();
  } catch (err) {
    setState("unreachable");
  }
  setTimeout(pollStatus, POLL_MS);
}

buildCards();
render();
pollMetrics();
pollStatus();
