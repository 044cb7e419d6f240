// recjudge annotate: the labelling page. Every text of a task is set with textContent (never as
// markup); the page's data comes from the JSON block the server wrote, parsed, never evaluated.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("recjudge-data").textContent);
  const $ = (id) => document.getElementById(id);
  const levels = data.scale.levels.map((l) => l[0]);
  let csrf = data.csrf;
  let current = null;
  let shownAt = performance.now();
  let busy = false;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function fields(target, list) {
    for (const [label, value] of list) {
      const row = el("div", undefined, "field");
      row.append(el("dt", label), el("dd", value));
      target.append(row);
    }
  }

  function show(view) {
    current = view.task;
    $("task").hidden = !current;
    $("done").hidden = !!current;
    $("adjudicate-link").hidden = !(view.adjudicate && !current);
    if (view.adjudicate) $("adjudicate").href = "/adjudicate/" + encodeURIComponent(data.annotator);
    $("flag").hidden = !view.flagged;
    const p = view.progress;
    let text = `${p.done} of ${p.total} labelled`;
    if (p.per_hour) text += ` · ${Math.round(p.per_hour)} per hour`;
    if (p.eta_seconds !== null && p.left) text += ` · about ${Math.max(1, Math.round(p.eta_seconds / 60))} min left`;
    if (p.skipped) text += ` · ${p.skipped} skipped`;
    $("progress").textContent = text;
    if (!current) return;
    const hist = $("history");
    hist.replaceChildren();
    for (const h of current.history) {
      const li = el("li");
      const dl = el("dl");
      fields(dl, h.fields);
      li.append(dl, el("span", "Rating: " + h.rating, "rating"));
      hist.append(li);
    }
    const cand = $("candidate");
    cand.replaceChildren();
    fields(cand, current.candidate);
    $("task").dataset.task = current.id;
    $("note").value = "";
    shownAt = performance.now();
  }

  async function post(body, retried) {
    const response = await fetch("/api/act" + location.search, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify({annotator: data.annotator, ...body}),
    });
    const answer = await response.json().catch(() => ({message: `HTTP ${response.status}`}));
    if (response.status === 403 && answer.error === "csrf" && !retried) {
      await refresh();  // the server restarted: its new token, then the action once more
      return post(body, true);
    }
    if (!response.ok) throw new Error(answer.message || `HTTP ${response.status}`);
    return answer;
  }

  async function refresh() {
    const q = new URLSearchParams(location.search);
    q.set("annotator", data.annotator);
    const response = await fetch("/api/state?" + q.toString(), {credentials: "same-origin"});
    if (!response.ok) throw new Error(`the server answered HTTP ${response.status}`);
    const view = await response.json();
    csrf = view.csrf;
    return view;
  }

  async function act(action, extra) {
    if (busy) return;
    busy = true;
    $("status").textContent = "";
    try {
      const body = {action, task: current ? current.id : null, ...extra};
      if (action === "label" || action === "skip") {
        body.seconds = (performance.now() - shownAt) / 1000;
        body.note = $("note").value;
      }
      show(await post(body, false));
    } catch (err) {
      $("status").textContent = "not saved: " + err.message + " (press the key again)";
    } finally {
      busy = false;
    }
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target === $("note")) {
      if (event.key === "Escape" || (event.key === "Enter" && !event.shiftKey)) {
        event.preventDefault();
        $("note").blur();
      }
      return;
    }
    const key = event.key;
    if (/^[0-9]$/.test(key) && current && levels.includes(Number(key))) {
      event.preventDefault();
      act("label", {label: Number(key)});
    } else if (key === "u") {
      act("undo");
    } else if (key === "s" && current) {
      act("skip");
    } else if (key === "f" && current) {
      act("flag");
    } else if (key === "n" && current) {
      event.preventDefault();
      $("note").focus();
    }
  });

  for (const button of document.querySelectorAll("button.level")) {
    button.addEventListener("click", () => act("label", {label: Number(button.dataset.label)}));
  }
  show(data);
  document.body.dataset.ready = "1";
})();
