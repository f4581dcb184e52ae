"use strict";
// Renders the report from the JSON block. Text only ever reaches the page through text nodes
// (never innerHTML), so nothing in a results file can become markup.
(function () {
  var data = JSON.parse(document.getElementById("toolrun-data").textContent);
  var cols = data.columns;

  // Control characters and bidirectional overrides as visible escapes: invisible characters
  // from a model must not hide or reorder what a reviewer reads.
  function visible(s) {
    return String(s).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g, function (c) {
      return "\\u{" + c.charCodeAt(0).toString(16) + "}";
    });
  }
  function el(tag, attrs) {
    var node = document.createElement(tag);
    var a = attrs || {};
    Object.keys(a).forEach(function (k) {
      if (k === "class") node.className = a[k];
      else if (k === "onclick") node.addEventListener("click", a[k]);
      else node.setAttribute(k, a[k]);
    });
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function add(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(visible(child)));
  }
  function json(v) {
    return typeof v === "string" ? v : JSON.stringify(v, null, 2);
  }
  function pct(r) { return Math.round(r * 100) + "%"; }
  function tokens(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function usd(c) { return c >= 1 ? "$" + c.toFixed(2) : "$" + c.toFixed(4); }
  function dur(ms) {
    if (ms >= 60000) return (ms / 60000).toFixed(1) + " min";
    if (ms >= 1000) return (ms / 1000).toFixed(1) + " s";
    return Math.round(ms) + " ms";
  }
  function metaLine(tok, cost, ms) {
    var parts = [tokens(tok) + " tok"];
    if (cost !== undefined && cost !== null) parts.push(usd(cost));
    parts.push(dur(ms));
    return parts.join(" · ");
  }

  // A budget of `expect` and what the attempt used of it, in the words of every other report
  // (`max_tokens: 30 / 4,000 tokens (1%)`): toolrun writes each budget's `text` into the page.
  function budgetLine(b) {
    return b.budget + ": " + (b.text || "");
  }
  function allBudgets(a) {
    return (a.budgets || []).concat.apply(a.budgets || [], (a.turns || []).map(function (t) { return t.budgets || []; }));
  }

  var root = document.getElementById("app");
  var specs = [];
  cols.forEach(function (c) { c.specs.forEach(function (s) { if (specs.indexOf(s.name) < 0) specs.push(s.name); }); });
  add(root, [
    el("h1", {}, "toolrun report"),
    el("p", { class: "sub" }, "specs: " + (specs.join(", ") || "none") + " · " + cols.length +
      " results file" + (cols.length === 1 ? "" : "s") + " · toolrun " + data.toolrun_version)
  ]);

  // Summary: one column per results file.
  var head = el("tr", {}, el("th", {}, ""), cols.map(function (c) {
    return el("th", { class: "col" }, c.label, el("span", { class: "file", style: "display:block" }, c.file));
  }));
  function sumRow(name, f) {
    return el("tr", {}, el("th", {}, name), cols.map(function (c) { return el("td", { class: "num" }, f(c)); }));
  }
  add(root, [el("h2", {}, "Summary"), el("table", { class: "summary", id: "summary" }, el("thead", {}, head), el("tbody", {},
    sumRow("models", function (c) { return c.models.join(", ") || "—"; }),
    sumRow("tests passed", function (c) {
      var ran = c.totals.passed + c.totals.failed;
      return c.totals.passed + "/" + ran + (ran ? " (" + pct(c.totals.passed / ran) + ")" : "") +
        (c.totals.skipped ? ", " + c.totals.skipped + " skipped" : "");
    }),
    sumRow("attempts passed", function (c) {
      return c.totals.attempts_passed + "/" + c.totals.attempts + " (" + pct(c.totals.pass_rate) +
        (c.interval ? ", 95% CI " + pct(c.interval.low) + "–" + pct(c.interval.high) : "") + ")";
    }),
    sumRow("tokens", function (c) { return tokens(c.totals.usage.total_tokens); }),
    sumRow("cost", function (c) { return c.totals.cost_usd === undefined ? "—" : usd(c.totals.cost_usd); }),
    sumRow("time", function (c) { return dur(c.totals.duration_ms); }),
    sumRow("started", function (c) { return c.started_at || "—"; })
  ))]);

  // Changes between neighbouring columns: beyond noise (regression, fixed) or within it.
  var LABELS = { regression: "regression", fixed: "fixed", worse: "worse, within noise", better: "better, within noise" };
  if (data.comparisons.some(function (x) { return x.paired; })) {
    var list = el("ul", { class: "changes", id: "changes" });
    data.comparisons.forEach(function (x) {
      var pair = cols[x.from].label + " → " + cols[x.to].label + ": ";
      add(list, el("li", { class: "overall" }, pair + x.paired + " test(s) in both, " + x.passed_only_before +
        " passed only in " + cols[x.from].label + ", " + x.passed_only_after + " only in " + cols[x.to].label + ": " + x.verdict));
      [["regressions", "regression"], ["fixes", "fixed"], ["worse", "worse"], ["better", "better"]].forEach(function (k) {
        x[k[0]].forEach(function (id) { add(list, el("li", {}, el("span", { class: "change " + k[1] }, LABELS[k[1]]), " " + pair + id)); });
      });
    });
    add(root, [el("h2", {}, "Changes"), list]);
  }
  data.notes.forEach(function (n) { add(root, el("p", { class: "notes" }, n)); });

  // The matrix: tests × results files, failing rows first (the order comes from toolrun).
  var filter = el("input", { type: "checkbox", id: "only-failing" });
  var tbody = el("tbody");
  var matrix = el("table", { class: "matrix", id: "matrix" },
    el("thead", {}, el("tr", {}, el("th", {}, "test"), cols.map(function (c) { return el("th", {}, c.label); }))),
    tbody);
  add(root, [el("h2", {}, "Tests"), el("label", { class: "filter" }, filter, " failing tests only"), matrix]);

  var open = null; // {row, col, tr}
  data.rows.forEach(function (row, r) {
    var tr = el("tr", { class: row.failing ? "row failing" : "row", "data-test": row.spec + "::" + row.name });
    add(tr, el("td", { class: "name" }, el("span", { class: "spec" }, row.spec + "::"), el("strong", {}, row.name),
      el("span", { class: "query" }, row.query)));
    row.cells.forEach(function (cell, c) {
      if (!cell) { add(tr, el("td", { class: "absent" }, "—")); return; }
      var label = { passed: "PASS", failed: "FAIL", skipped: "SKIP" }[cell.outcome];
      var btn = el("button", { class: "cell", id: "cell-" + r + "-" + c, "aria-expanded": "false",
        onclick: function () { toggleCell(r, c); } },
        el("span", { class: "badge" }, label),
        cell.runs ? el("span", { class: "rate" }, cell.passes + "/" + cell.runs + " (" + pct(cell.pass_rate) + ")" +
          (cell.runs > 1 && cell.interval ? " [" + pct(cell.interval.low) + "–" + pct(cell.interval.high) + "]" : "")) : null,
        cell.change ? el("span", { class: "change " + cell.change }, LABELS[cell.change] +
          (cell.p_value !== undefined ? " (p=" + (cell.p_value < 0.001 ? "<0.001" : cell.p_value.toFixed(3)) + ")" : "")) : null,
        cell.runs ? el("span", { class: "meta" }, metaLine(cell.tokens, cell.cost_usd, cell.duration_ms)) : null,
        cell.reason ? el("span", { class: "meta" }, cell.reason) : null);
      add(tr, el("td", { class: cell.outcome }, btn));
    });
    add(tbody, tr);
  });

  filter.addEventListener("change", function () {
    Array.prototype.forEach.call(tbody.querySelectorAll("tr.row"), function (tr) {
      tr.style.display = filter.checked && !tr.classList.contains("failing") ? "none" : "";
    });
  });

  function toggleCell(r, c) {
    var wasSame = open && open.row === r && open.col === c;
    if (open) {
      open.tr.remove();
      document.getElementById("cell-" + open.row + "-" + open.col).setAttribute("aria-expanded", "false");
      open = null;
    }
    if (wasSame) return null;
    var row = data.rows[r], cell = row.cells[c];
    var td = el("td", { colspan: String(cols.length + 1) });
    var tr = el("tr", { class: "detail", id: "detail-" + r + "-" + c }, td);
    add(td, el("strong", {}, row.spec + "::" + row.name + " — " + cols[c].label));
    if (cell.reason) add(td, el("p", {}, cell.reason));
    var list = el("div", { class: "attempts" });
    cell.attempts.forEach(function (a) {
      var id = r + "-" + c + "-" + a.attempt;
      var summary = "#" + a.attempt + " " + a.outcome.toUpperCase() + " · " + a.source +
        (a.status ? " · " + a.status + " (" + a.stop_reason + ")" : "") +
        " · " + a.tool_calls.length + " tool call" + (a.tool_calls.length === 1 ? "" : "s") +
        " · " + metaLine(a.usage ? a.usage.total_tokens : 0, a.cost_usd, a.duration_ms) +
        // How close the attempt came to its tightest budget, its turns' included.
        (allBudgets(a).length ? " · budget " + pct(Math.max.apply(null, allBudgets(a).map(function (b) { return b.share || 0; }))) : "");
      var btn = el("button", { class: "attempt " + a.outcome, id: "attempt-" + id, "aria-expanded": "false",
        onclick: function () {
          var shown = document.getElementById("trajectory-" + id);
          if (shown) { shown.remove(); btn.setAttribute("aria-expanded", "false"); return; }
          btn.setAttribute("aria-expanded", "true");
          btn.after(trajectory(row, a, id));
          if (history.replaceState) history.replaceState(null, "", "#open=" + c + "/" + a.attempt + "/" + encodeURIComponent(row.spec + "::" + row.name));
        } }, summary);
      add(list, btn);
    });
    add(td, list);
    document.getElementById("cell-" + r + "-" + c).closest("tr").after(tr);
    document.getElementById("cell-" + r + "-" + c).setAttribute("aria-expanded", "true");
    open = { row: r, col: c, tr: tr };
    return tr;
  }

  function trajectory(row, a, id) {
    var box = el("div", { class: "trajectory", id: "trajectory-" + id });
    add(box, el("div", { class: "step query" }, el("span", { class: "lbl" }, "query"), el("pre", {}, row.query)));
    // A conversation (`turns:`): what each user turn asked, ran and came to, in order.
    (a.turns || []).forEach(function (t) {
      add(box, el("div", { class: "step turn " + (t.status === "ok" ? "ok" : "error"), id: "turn-" + id + "-" + t.turn },
        el("span", { class: "lbl" }, "turn " + t.turn + " · " + t.status + " (" + t.stop_reason + ") · " +
          t.steps + " model call" + (t.steps === 1 ? "" : "s") +
          (t.outcome ? " · expect " + t.outcome : "")),
        el("pre", { class: "query" }, t.query),
        el("span", { class: "meta tools" }, t.tool_calls.length ? "tools run: " + t.tool_calls.join(", ") : "no tools run"),
        t.answer !== undefined ? el("pre", { class: "answer" }, t.answer) : null,
        t.error !== undefined ? el("pre", { class: "error" }, t.error) : null,
        t.budgets && t.budgets.length ? el("pre", { class: "budgets" }, t.budgets.map(budgetLine).join("\n")) : null));
    });
    a.tool_calls.forEach(function (call) {
      var outcome = call.status === "ok"
        ? [el("span", { class: "lbl" }, "result"), el("pre", { class: "result" }, json(call.result))]
        : call.error
          ? [el("span", { class: "lbl" }, "error · " + call.error.kind), el("pre", { class: "error" }, call.error.message)]
          : [el("span", { class: "lbl" }, call.status.replace("_", " "))];
      add(box, el("div", { class: "step call " + (call.status === "ok" ? "ok" : "error") },
        el("span", { class: "lbl" }, "step " + call.step + " · tool call · " + call.status +
          (call.duration_ms !== undefined ? " · " + dur(call.duration_ms) : "")),
        el("strong", { class: "tool" }, call.name),
        call.http ? el("span", { class: "meta http" }, call.http.method + " " + call.http.url + " → " + call.http.status) : null,
        el("pre", { class: "arguments" }, json(call.arguments)), outcome));
    });
    if (a.pending_tool_call) {
      add(box, el("div", { class: "step call pending" }, el("span", { class: "lbl" }, "waiting for confirmation"),
        el("strong", { class: "tool" }, a.pending_tool_call.name), el("pre", { class: "arguments" }, json(a.pending_tool_call.arguments))));
    }
    if (a.answer !== undefined) {
      add(box, el("div", { class: "step answer" }, el("span", { class: "lbl" }, "answer"), el("pre", {}, a.answer)));
    }
    if (a.status) {
      add(box, el("div", { class: "step end" }, el("span", { class: "lbl" }, "run"),
        el("pre", {}, "status " + a.status + ", stop reason " + a.stop_reason + ", " + a.steps + " model call" + (a.steps === 1 ? "" : "s") +
          (a.error ? "\n" + a.error : ""))));
    }
    if (a.judge) {
      add(box, el("div", { class: "step judge" }, el("span", { class: "lbl" }, "judge · " + a.judge.model + " · score " +
        a.judge.score + " (needs " + a.judge.pass + ")"), el("pre", {}, a.judge.reasoning)));
    }
    if (a.budgets && a.budgets.length) {
      add(box, el("div", { class: "step budgets" }, el("span", { class: "lbl" }, "budgets · measured on the " + a.source + " attempt"),
        el("pre", {}, a.budgets.map(budgetLine).join("\n"))));
    }
    (a.failures || []).forEach(function (f) {
      var what = f.kind === "assertion" ? "failed assertion" + (f.assertion ? " · " + f.assertion : "") : f.kind;
      add(box, el("div", { class: "step failure" }, el("span", { class: "lbl" }, what), el("pre", {}, f.message)));
    });
    return box;
  }

  // `#open=COL/ATTEMPT/spec::test` opens that attempt, so a link can point at one trajectory.
  var m = /^#open=(\d+)\/(\d+)\/(.+)$/.exec(location.hash);
  if (m) {
    var want = decodeURIComponent(m[3]);
    data.rows.forEach(function (row, r) {
      if (row.spec + "::" + row.name !== want || !row.cells[+m[1]]) return;
      document.getElementById("cell-" + r + "-" + m[1]).click();
      var att = document.getElementById("attempt-" + r + "-" + m[1] + "-" + m[2]);
      if (att) { att.click(); att.scrollIntoView(); }
    });
  }
  document.body.setAttribute("data-rendered", "true");
})();
