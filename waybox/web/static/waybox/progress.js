// The progress page: polls a small JSON endpoint and redraws three tables (no page reloads).
(function () {
  "use strict";
  var root = document.getElementById("progress");
  if (!root) return;
  var endpoint = root.getAttribute("data-endpoint");
  var state = document.getElementById("progress-state");
  var POLL_MS = 1000;
  var failures = 0;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }
  function badge(status) { return el("span", {"class": "badge " + status, text: status}); }
  function when(iso) {
    if (!iso) return "–";
    var d = new Date(iso);
    return d.toLocaleTimeString();
  }
  function link(href, text) { return el("a", {href: href, text: text}); }
  function hooks(list) {
    if (!list.length) return el("span", {"class": "muted", text: "–"});
    return el("div", {"class": "hooks"}, list.map(function (h) {
      return el("span", {"class": "hookchip", title: h.hook + " (attempt " + h.attempts + ")",
                         text: h.plugin + " " + (h.elapsed === null ? "" : Math.round(h.elapsed) + "s")});
    }));
  }
  function fill(id, rows, empty, cols) {
    var body = document.getElementById(id);
    body.replaceChildren();
    if (!rows.length) {
      body.appendChild(el("tr", {}, [el("td", {"class": "empty-row", colspan: String(cols), text: empty})]));
      return;
    }
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function counts(c) {
    var total = 0, parts = [];
    Object.keys(c).forEach(function (k) { total += c[k]; });
    ["started", "queued"].forEach(function (k) { if (c[k]) parts.push(c[k] + " " + k); });
    return (c.sealed || 0) + "/" + total + " done" + (parts.length ? " (" + parts.join(", ") + ")" : "");
  }
  function draw(data) {
    fill("crawls", data.crawls.map(function (c) {
      return el("tr", {"data-crawl": c.id, "data-status": c.status}, [
        el("td", {}, [link("/?crawl=" + c.id, c.url + (c.urls > 1 ? " and " + (c.urls - 1) + " more" : "")),
                      el("div", {"class": "small muted", text: "depth " + c.depth}),
                      c.hooks.length ? hooks(c.hooks) : null]),
        el("td", {"class": "crawl-status"}, [badge(c.status)]),
        el("td", {text: counts(c.snapshots)}),
        el("td", {"class": "nowrap", text: when(c.started_at)})
      ]);
    }), "No crawls running.", 4);
    fill("snapshots", data.snapshots.map(function (s) {
      var fillbar = el("span");
      fillbar.style.width = (s.status === "queued" ? 0 : (s.current_step + 1) * 10) + "%";
      var bar = el("span", {"class": "stepbar"}, [fillbar]);
      return el("tr", {"data-snapshot": s.id, "data-status": s.status}, [
        el("td", {}, [link(s.href, s.title || s.url), el("div", {"class": "small muted", text: s.title ? s.url : ""})]),
        el("td", {}, [badge(s.status)]),
        el("td", {"class": "nowrap"}, [bar, document.createTextNode(s.status === "queued" ? "–" : s.current_step + "/9")]),
        el("td", {}, [hooks(s.hooks)])
      ]);
    }), "Nothing is being archived right now." + (data.queued ? " " + data.queued + " queued." : ""), 4);
    fill("recent", data.recent.map(function (s) {
      return el("tr", {"data-snapshot": s.id, "data-status": s.status}, [
        el("td", {}, [link(s.href, s.title || s.url), el("div", {"class": "small muted", text: s.title ? s.url : ""})]),
        el("td", {}, [badge(s.status)]),
        el("td", {"class": "nowrap", text: when(s.ended_at)})
      ]);
    }), "Nothing finished yet.", 3);
    state.textContent = "Updated " + new Date().toLocaleTimeString() + " · refreshes every second";
  }
  function poll() {
    fetch(endpoint, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (r) {
        if (r.status === 401 || r.status === 403 || r.redirected) throw new Error("log in again to see progress");
        if (!r.ok) throw new Error("server answered " + r.status);
        return r.json();
      })
      .then(function (data) { failures = 0; draw(data); })
      .catch(function (err) { failures += 1; state.textContent = "Cannot update: " + err.message; })
      .then(function () { setTimeout(poll, failures ? Math.min(10000, POLL_MS * (1 + failures)) : POLL_MS); });
  }
  poll();
})();
