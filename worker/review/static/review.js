// vigil review: the page's only script. A verdict no judge gave (a regex, JSON-schema or tool-policy check, a Python
// function: its score row names no judge) is a check's, and its buttons say "Check right / wrong"; the others are a
// judge's. After a label the next item opens at its question, and the header keeps a mark of what was saved. Trace text only ever enters the page as text nodes (el() below): no
// innerHTML, no links, no attributes taken from a trace, so a turn's text cannot become markup or script.
"use strict";
(() => {
  const csrf = document.querySelector('meta[name="vigil-csrf"]').content;
  const $ = (id) => document.getElementById(id);
  const state = { item: null, active: 0, blocks: [], busy: false };
  const SAFE_ATTRS = new Set(["class", "type", "min", "max", "step", "title", "placeholder", "aria-label", "id"]);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key.startsWith("data-") || SAFE_ATTRS.has(key)) node.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const text = (value, tag = "div") => el(tag, { class: "text" }, value ?? "");
  const json = (value) => el("pre", { class: "text" }, JSON.stringify(value, null, 2));

  function say(message, isError = false) {
    $("status").textContent = message;
    $("status").className = isError ? "error" : "";
  }

  const pageReviewer = document.querySelector('meta[name="vigil-reviewer"]').content;
  const named = !!document.querySelector('meta[name="vigil-reviewer-named"]').content;  // the token says who
  function reviewer() {
    return named ? pageReviewer : ($("reviewer").value.trim() || pageReviewer);
  }

  async function api(path, body) {
    const init = body === undefined ? {} : {
      method: "POST", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", "X-Vigil-CSRF": csrf },
    };
    const response = await fetch("/review/api/" + path, { ...init, credentials: "same-origin" });
    const data = await response.json().catch(() => ({ error: response.statusText }));
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  // -- progress ---------------------------------------------------------------------------------------------
  const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(0) + "%");

  async function progress() {
    const { monitors } = await api("progress");
    const select = $("monitor");
    if (!select.options.length) {
      for (const m of monitors) select.append(el("option", {}, m.monitor));
      const saved = localStorage.getItem("vigil.monitor");
      if (saved && monitors.some((m) => m.monitor === saved)) select.value = saved;
    }
    $("progress-rows").replaceChildren(...monitors.map((m) => {
      const a = m.agreement;
      const estimate = a.value === null ? "n/a" : pct(a.value);
      const interval = a.low === null ? "" : ` (${pct(a.low)}–${pct(a.high)})`;
      return el("tr", { "data-monitor": m.monitor },
        el("td", {}, m.monitor),
        el("td", { "data-field": "reviewed" }, `${m.reviewed} / ${m.population}`),
        el("td", { "data-field": "unreviewed" }, m.unreviewed),
        el("td", { "data-field": "agreement", title: `${a.random} random, ${a.chosen} chosen labels` },
          estimate + interval));
    }));
    return monitors;
  }

  // -- one item ---------------------------------------------------------------------------------------------
  function span(s) {
    const parts = [];
    if (s.system) parts.push(el("h3", {}, "System prompt"), text(s.system, "pre"));
    parts.push(el("h3", { "data-field": "question" }, "Question"));
    for (const m of s.input || []) parts.push(el("div", { class: "text" }, el("span", { class: "role" }, m.role), m.content));
    parts.push(el("h3", {}, "Answer"), text(s.output));
    if ((s.contexts || []).length) {
      parts.push(el("h3", {}, `Contexts (${s.contexts.length})`),
        el("ol", {}, s.contexts.map((c) => el("li", {}, c.id ? el("span", { class: "role" }, c.id) : null,
          c.score !== null && c.score !== undefined ? `[${c.score}] ` : "", text(c.text)))));
    }
    if ((s.tool_calls || []).length) {
      parts.push(el("h3", {}, `Tool calls, in order (${s.tool_calls.length})`),
        el("ol", {}, s.tool_calls.map((t) => el("li", {}, el("b", {}, t.name), json(t.arguments || {}),
          t.result !== null && t.result !== undefined ? text(t.result) : null,
          t.error ? el("div", { class: "text error-text" }, "error: ", t.error) : null))));
    }
    if (s.reference) parts.push(el("h3", {}, "Reference answer"), text(s.reference));
    const meta = { agent: s.agent, environment: s.environment, model: s.model, started: s.started_at,
      session: s.session_id, tags: (s.tags || []).join(", "), truncated: (s.truncated || []).join(", "),
      ...(s.metadata || {}) };
    parts.push(el("h3", {}, "Metadata"),
      el("div", { class: "meta" }, Object.entries(meta).filter(([, v]) => v).map(([k, v]) => [el("span", { class: "role" }, k), el("span", {}, v)])));
    return parts;
  }

  function latestScores(scores) {
    const by = new Map();
    for (const s of scores) {
      const seen = by.get(s.monitor);
      if (!seen || String(s.scored_at) > String(seen.scored_at)) by.set(s.monitor, s);
    }
    return [...by.values()];
  }

  function monitorBlock(score, item) {
    const scale = score.scale || 1;
    const scored = score.status === "scored" && score.score !== null;
    const who = score.judge ? "Judge" : "Check";  // who gave the verdict being labelled
    const labels = (item.labels || []).filter((l) => l.monitor === score.monitor && l.source === "reviewer");
    const input = el("input", { type: "number", min: 0, max: scale, step: "any", "data-action": "score",
      "aria-label": `score on 0..${scale}`, placeholder: `0–${scale}` });
    const block = el("section", { class: "monitor", "data-monitor": score.monitor },
      el("div", {}, el("b", {}, score.monitor), " ",
        el("span", { class: "score" }, scored ? `${+score.score.toFixed(3)} / ${scale}` : score.status),
        score.label ? ` · ${score.label}` : "", score.judge_model ? ` · ${score.judge_model}` : ""),
      score.reason ? text(score.reason) : null,
      (score.steps || []).length ? el("details", {}, el("summary", {}, `steps (${score.steps.length})`), json(score.steps)) : null,
      labels.length ? el("div", { class: "note" }, "earlier labels: ",
        labels.map((l) => `${l.author}: ${l.value}/${l.scale}${l.comment ? " “" + l.comment + "”" : ""}`).join("; ")) : null,
      el("div", { class: "actions" },
        el("button", { type: "button", "data-action": "judge-right", title: "r" }, `${who} right (r)`),
        el("button", { type: "button", "data-action": "judge-wrong", title: "w" }, `${who} wrong (w)`),
        input,
        el("button", { type: "button", "data-action": "score-send", title: "Enter" }, "Score (Enter)"),
        el("span", { class: "done", "data-field": "done" })));
    if (!scored) for (const b of block.querySelectorAll('[data-action^="judge-"]')) b.disabled = true;
    block.querySelector('[data-action="judge-right"]').addEventListener("click", () => label(score.monitor, "judge-right"));
    block.querySelector('[data-action="judge-wrong"]').addEventListener("click", () => label(score.monitor, "judge-wrong"));
    block.querySelector('[data-action="score-send"]').addEventListener("click", () => sendScore(score.monitor));
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); sendScore(score.monitor); } });
    block.addEventListener("click", () => activate(state.blocks.indexOf(block)));
    return block;
  }

  function render(item) {
    const article = $("item");
    state.item = item;
    $("empty").hidden = !!item;
    article.hidden = !item;
    if (!item) { article.replaceChildren(); article.removeAttribute("data-trace-id"); return; }
    const first = item.spans[0] || {};
    const scores = latestScores(item.scores);
    scores.sort((a, b) => (a.monitor === item.monitor ? -1 : b.monitor === item.monitor ? 1 : a.monitor.localeCompare(b.monitor)));
    state.blocks = scores.map((s) => monitorBlock(s, item));
    const session = item.session || [];
    article.replaceChildren(...[
      el("p", { class: "source", "data-queue": item.queue }, "From ", el("b", {}, item.queue), ": ", item.queue_title,
        ` · ${item.monitor} · trace ${item.trace_id}`),
      session.length ? el("details", {}, el("summary", {}, `Session: ${session.length} earlier turn(s)`),
        el("ol", {}, session.map((t) => el("li", {}, text(t.question), text(t.output))))) : null,
      item.spans.map(span),
      el("h3", {}, "Monitors"),
      el("p", { class: "note", id: "label-meaning" }, "A label records whether this monitor's verdict on this turn is ",
        "right or wrong (or your own score on its scale), with your name and comment, as a feedback row: the ",
        "agreement figures and alerts read it, and no score changes."),
      state.blocks,
      el("textarea", { id: "comment", placeholder: "Comment, sent with the next label (c)", "aria-label": "comment" }),
      el("div", { class: "actions" }, el("button", { type: "button", "data-action": "skip", title: "s" }, "Skip (s)")),
    ].flat(2).filter(Boolean));
    article.setAttribute("data-trace-id", item.trace_id);
    article.querySelector('[data-action="skip"]').addEventListener("click", skip);
    activate(0);
    if (first.trace_id) say(`${item.monitor}: item from ${item.queue}`);
    const question = article.querySelector('[data-field="question"]');
    if (question) {  // the next item opens at its question, just under the (sticky) header with the saved mark
      window.scrollBy(0, question.getBoundingClientRect().top - document.querySelector("header").offsetHeight - 8);
    }
  }

  function saved(monitor, action, value, author) {
    const what = action === "score" ? `score ${value}` : action.replace("judge-", "");
    $("saved").textContent = `✓ saved: ${monitor} ${what}, by ${author}`;
    $("saved").hidden = false;
  }

  function activate(index) {
    if (!state.blocks.length) return;
    state.active = (index + state.blocks.length) % state.blocks.length;
    state.blocks.forEach((b, i) => b.classList.toggle("active", i === state.active));
  }

  // -- actions ----------------------------------------------------------------------------------------------
  async function next() {
    const monitor = $("monitor").value;
    if (!monitor) { render(null); return; }
    const query = new URLSearchParams({ monitor, queue: $("queue").value, reviewer: reviewer() });
    try {
      const { item } = await api("next?" + query);
      render(item);
      if (!item) say("queue empty");
    } catch (error) { say(error.message, true); }
  }

  async function label(monitor, action, value) {
    const item = state.item;
    if (!item || state.busy) return;
    state.busy = true;
    const comment = ($("comment") || {}).value || "";
    try {
      const answer = await api("label", { project: item.project, trace_id: item.trace_id, monitor, action, value,
        comment, queue: item.queue, reviewer: reviewer(), keep_lease: monitor !== item.monitor });
      saved(monitor, action, value, answer.author);
      if (monitor === item.monitor) await next();
      else {
        const block = state.blocks.find((b) => b.dataset.monitor === monitor);
        if (block) block.querySelector('[data-field="done"]').textContent = "✓ saved";
      }
      setTimeout(() => progress().catch(() => {}), 1500);
    } catch (error) { say(error.message, true); }
    finally { state.busy = false; }
  }

  function sendScore(monitor) {
    const block = state.blocks.find((b) => b.dataset.monitor === monitor);
    const input = block && block.querySelector('[data-action="score"]');
    if (!input || input.value === "") { say("type a score first", true); return; }
    label(monitor, "score", Number(input.value));
  }

  async function skip() {
    const item = state.item;
    if (!item || state.busy) return;
    state.busy = true;
    try { await api("skip", { project: item.project, trace_id: item.trace_id, reviewer: reviewer() }); await next(); }
    catch (error) { say(error.message, true); }
    finally { state.busy = false; }
  }

  document.addEventListener("keydown", (e) => {
    const target = e.target;
    const typing = target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement;
    if (e.key === "Escape" && typing) { target.blur(); return; }
    if (typing || e.ctrlKey || e.metaKey || e.altKey || !state.item) return;
    const block = state.blocks[state.active];
    const monitor = block && block.dataset.monitor;
    if (e.key === "r" && monitor) label(monitor, "judge-right");
    else if (e.key === "w" && monitor) label(monitor, "judge-wrong");
    else if (e.key === "s") skip();
    else if (e.key === "c") { e.preventDefault(); $("comment").focus(); }
    else if (e.key === "]") activate(state.active + 1);
    else if (e.key === "[") activate(state.active - 1);
    else if (/^[0-9]$/.test(e.key) && block) {
      e.preventDefault();
      const input = block.querySelector('[data-action="score"]');
      input.value = e.key;
      input.focus();
    } else return;
    e.preventDefault();
  });

  $("reviewer").value = named ? pageReviewer : localStorage.getItem("vigil.reviewer") || "";
  $("reviewer").readOnly = named;
  $("reviewer").placeholder = pageReviewer;
  $("reviewer").addEventListener("change", () => { localStorage.setItem("vigil.reviewer", $("reviewer").value.trim()); next(); });
  $("queue").value = localStorage.getItem("vigil.queue") || "auto";
  $("queue").addEventListener("change", () => { localStorage.setItem("vigil.queue", $("queue").value); next(); });
  $("monitor").addEventListener("change", () => { localStorage.setItem("vigil.monitor", $("monitor").value); next(); });
  progress().then(next).catch((error) => say(error.message, true));
  setInterval(() => progress().catch(() => {}), 5000);
  // a label needs the turn leased to this reviewer: keep the lease while the turn is open, however long it is read
  setInterval(() => {
    if (state.item) api("renew", { project: state.item.project, trace_id: state.item.trace_id, reviewer: reviewer() }).catch((error) => say(error.message, true));
  }, 60000);
})();
