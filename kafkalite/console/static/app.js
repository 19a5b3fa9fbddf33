// kafkalite console: a hash-routed page over the JSON API (no build step, no framework).
"use strict";

const view = document.getElementById("view");
let timer = null; // the throughput page's poller, stopped on navigation

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== null && value !== undefined) node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function table(id, headers, rows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headers.map(h => el("th", { class: h.num ? "num" : "" }, h.label ?? h)))),
    el("tbody", {}, rows));
}

function formatBytes(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return `${unit === 0 ? String(value) : value.toFixed(1)} ${units[unit]}`;
}

function size(bytes, cls = "") {
  const title = "sizes come from the brokers' /metrics: start the console with --metrics URL";
  if (bytes === null || bytes === undefined) return el("td", { class: `num ${cls}`, title }, "–");
  return el("td", { class: `num ${cls}`, "data-bytes": bytes }, formatBytes(bytes));
}

function num(value, cls = "") {
  const shown = value === null || value === undefined ? "–" : Number(value).toLocaleString("en-US");
  return el("td", { class: `num ${cls}` }, shown);
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    headers: { "Content-Type": "application/json" }, ...options,
  });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw Object.assign(new Error(body.error || response.statusText), { status: response.status });
  return body;
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message; box.hidden = !message;
}

function showNotice(message) {
  const box = document.getElementById("notice");
  box.textContent = message; box.hidden = !message;
}

function confirmAction(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise(resolve => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.showModal();
  });
}

function render(title, ...content) {
  view.replaceChildren(el("h2", { id: "title" }, title), ...content);
  view.dataset.loaded = location.hash;
}

// -- pages ------------------------------------------------------------------------------

const PROBLEMS = [["offline", "offline"], ["under_min_isr", "under min ISR"],
  ["under_replicated", "under-replicated"]];

// What is wrong with a partition (or, with counts, a topic): "" when healthy.
function problems(flagsOrCounts) {
  return PROBLEMS.filter(([key]) => flagsOrCounts[key])
    .map(([key, label]) => typeof flagsOrCounts[key] === "number" ? `${flagsOrCounts[key]} ${label}` : label)
    .join(", ");
}

function healthCell(flagsOrCounts) {
  const found = problems(flagsOrCounts);
  return el("td", { class: found ? "health bad" : "health ok" }, found || "ok");
}

async function brokersPage() {
  const cluster = await api("/api/cluster");
  const online = cluster.brokers.filter(b => b.online).length;
  const card = (label, id, value) => el("div", { class: value ? "card bad" : "card" },
    el("div", { class: "label" }, label), el("div", { class: "big", id }, value));
  render("Brokers",
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "label" }, "Cluster id"),
        el("div", { class: "big", id: "cluster-id" }, cluster.cluster_id)),
      el("div", { class: "card" }, el("div", { class: "label" }, "Controller"),
        el("div", { class: "big", id: "controller" }, cluster.controller)),
      el("div", { class: "card" }, el("div", { class: "label" }, "Brokers online"),
        el("div", { class: "big", id: "broker-count" }, online)),
      card("Offline brokers", "offline-brokers", cluster.brokers.length - online),
      card("Offline partitions", "offline-partitions", cluster.partitions.offline),
      card("Under min ISR", "under-min-isr", cluster.partitions.under_min_isr),
      card("Under-replicated", "under-replicated", cluster.partitions.under_replicated)),
    table("brokers", ["Id", "Host", "Port", "Rack", "Role", "Status"], cluster.brokers.map(b =>
      el("tr", { "data-broker": b.id, class: b.online ? "" : "offline" }, el("td", {}, b.id),
        el("td", { class: "host" }, b.host ?? "–"), el("td", { class: "port" }, b.port ?? "–"),
        el("td", {}, b.rack ?? "–"), el("td", {}, b.controller ? "controller" : "broker"),
        el("td", { class: b.online ? "status ok" : "status bad" }, b.online ? "online" : "offline")))));
}

async function topicsPage() {
  const topics = await api("/api/topics");
  const name = el("input", { id: "topic-name", placeholder: "name", required: "" });
  const partitions = el("input", { id: "topic-partitions", type: "number", min: "1", value: "1" });
  const replication = el("input", { id: "topic-replication", type: "number", min: "1", value: "1" });
  const configs = el("textarea", { id: "topic-configs", rows: "2", placeholder: "retention.ms=86400000" });
  const create = el("button", { id: "topic-create", onclick: async () => {
    try {
      await api("/api/topics", { method: "POST", body: JSON.stringify({
        name: name.value, partitions: Number(partitions.value),
        replication_factor: Number(replication.value), configs: pairs(configs.value, "=") }) });
      showNotice(`Topic ${name.value} created`);
      await route();
    } catch (e) { showError(e.message); }
  } }, "Create topic");
  render("Topics",
    el("div", { class: "toolbar" },
      el("label", {}, "New topic", name), el("label", {}, "Partitions", partitions),
      el("label", {}, "Replication", replication),
      el("label", {}, "Configs (name=value per line)", configs), create),
    table("topics", ["Name", { label: "Partitions", num: 1 }, { label: "Replication", num: 1 },
      { label: "Messages", num: 1 }, { label: "Size", num: 1 }, "Health"], topics.map(t =>
      el("tr", { "data-topic": t.name, class: problems(t) ? "unhealthy" : "" },
        el("td", {}, el("a", { href: `#/topics/${encodeURIComponent(t.name)}` }, t.name),
          t.internal ? el("span", { class: "muted" }, " (internal)") : "",
          t.view_of ? el("span", { class: "muted view-of" }, ` (view of ${t.view_of}: ${t.filter})`) : ""),
        num(t.partitions, "partitions"), num(t.replication, "replication"),
        num(t.messages, "messages"), size(t.size, "size"), healthCell(t)))));
}

// "name=value" (or "name: value") lines as an object; blank lines skipped.
function pairs(textValue, separator) {
  return Object.fromEntries(entries(textValue, separator));
}

function entries(textValue, separator) {
  return textValue.split("\n").filter(line => line.trim()).map(line => {
    const at = line.indexOf(separator);
    if (at < 0) throw new Error(`"${line}" is not name${separator}value`);
    return [line.slice(0, at).trim(), line.slice(at + separator.length).trim()];
  });
}

// An action on the topic being viewed failed: a topic deleted meanwhile (404) takes the page
// back to the list with a notice; anything else is shown as an error.
function topicFailed(topic, error) {
  if (error.status === 404) navigate("#/topics", `Topic ${topic.name} was deleted`);
  else showError(error.message);
}

function producer(topic) {
  const partition = el("select", { id: "produce-partition" }, el("option", { value: "any" }, "any (partitioner)"),
    topic.partitions.map(p => el("option", { value: p.partition }, p.partition)));
  const key = el("input", { id: "produce-key", placeholder: "none" });
  const value = el("textarea", { id: "produce-value", rows: "3", cols: "50" });
  const headers = el("textarea", { id: "produce-headers", rows: "3", placeholder: "name: value" });
  const send = el("button", { id: "produce-send", onclick: async () => {
    try {
      const written = await api(`/api/topics/${encodeURIComponent(topic.name)}/messages`, {
        method: "POST", body: JSON.stringify({ partition: partition.value,
          key: key.value === "" ? null : key.value, value: value.value,
          headers: entries(headers.value, ":") }) });
      showNotice(`Message written to partition ${written.partition} at offset ${written.offset}`);
    } catch (e) { topicFailed(topic, e); }
  } }, "Produce");
  return [el("h3", {}, "Produce a message"),
    el("div", { class: "toolbar" }, el("label", {}, "Partition", partition), el("label", {}, "Key", key),
      el("label", {}, "Value", value), el("label", {}, "Headers (name: value per line)", headers), send)];
}

function configEditor(topic) {
  const path = `/api/topics/${encodeURIComponent(topic.name)}/configs`;
  const name = el("input", { id: "config-name", list: "config-names", placeholder: "retention.ms" });
  const value = el("input", { id: "config-value" });
  const names = el("datalist", { id: "config-names" }, topic.configs.map(c => el("option", { value: c.name })));
  const alter = async (body, done) => {
    try {
      await api(path, { method: "POST", body: JSON.stringify(body) });
      showNotice(done);
      await route();
    } catch (e) { topicFailed(topic, e); }
  };
  return el("div", { class: "toolbar" }, el("label", {}, "Config", name), names, el("label", {}, "Value", value),
    el("button", { id: "config-set", onclick: () =>
      alter({ set: { [name.value]: value.value } }, `${name.value} set to ${value.value}`) }, "Set"),
    el("button", { id: "config-reset", class: "secondary", onclick: () =>
      alter({ delete: [name.value] }, `${name.value} back to its default`) }, "Reset to default"));
}

function renderValue(part) {
  if (part === null || part === undefined) return el("span", { class: "muted" }, "null");
  if (part.base64 !== undefined) return el("pre", { class: "muted" }, `base64:${part.base64}`);
  if (part.json) return el("pre", { class: "json" }, JSON.stringify(JSON.parse(part.text), null, 2));
  return el("pre", {}, part.text);
}

function messageBrowser(topic) {
  const partition = el("select", { id: "msg-partition" }, el("option", { value: "all" }, "all"),
    topic.partitions.map(p => el("option", { value: p.partition }, p.partition)));
  const mode = el("select", { id: "msg-mode" }, el("option", { value: "latest" }, "latest"),
    el("option", { value: "offset" }, "from offset"), el("option", { value: "time" }, "from time"));
  const order = el("select", { id: "msg-order" }, el("option", { value: "newest" }, "newest first"),
    el("option", { value: "oldest" }, "oldest first"));
  const offset = el("input", { id: "msg-offset", type: "number", min: "0", value: "0" });
  const time = el("input", { id: "msg-time", type: "datetime-local", step: "1" });
  const limit = el("input", { id: "msg-limit", type: "number", min: "1", max: "1000", value: "20" });
  const contains = el("input", { id: "msg-contains", placeholder: "key, value or header text" });
  const results = el("div", { id: "messages-box" });
  let query = null, pageNumber = 0;
  const show = async cursor => {
    try {
      const page = await api(`/api/topics/${encodeURIComponent(topic.name)}/messages?${query}` +
        (cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""));
      pageNumber = cursor ? pageNumber + 1 : 1;
      const messages = page.messages;
      const older = query.get("mode") === "latest";
      const next = page.next === null ? el("span", { class: "muted", id: "msg-last" }, "last page") :
        el("button", { id: "msg-next", class: "secondary", onclick: () => show(page.next) },
          older ? "Older messages" : "Newer messages");
      results.replaceChildren(el("p", { class: "muted", id: "messages-count" },
        `Page ${pageNumber}: ${messages.length} message(s) `, next),
        table("messages", ["Partition", "Offset", "Timestamp", "Key", "Headers", "Value"],
          messages.map(m => el("tr", { class: "message", "data-offset": m.offset, "data-partition": m.partition },
            el("td", { class: "partition" }, m.partition), el("td", { class: "offset" }, m.offset),
            el("td", { class: "timestamp" }, m.timestamp >= 0 ? new Date(m.timestamp).toISOString() : "–"),
            el("td", { class: "key" }, renderValue(m.key)),
            el("td", { class: "headers" }, m.headers.map(([k, v]) =>
              el("div", { class: "header" }, `${k}: `, v === null ? "null" : (v.text ?? `base64:${v.base64}`)))),
            el("td", { class: "value" }, renderValue(m.value))))));
      results.dataset.loaded = "yes";
    } catch (e) { topicFailed(topic, e); }
  };
  const load = () => {
    query = new URLSearchParams({ partition: partition.value, mode: mode.value, order: order.value,
      limit: limit.value, offset: offset.value, contains: contains.value,
      time: time.value ? new Date(time.value).toISOString() : "" });
    return show(null);
  };
  return [el("h3", {}, "Messages"),
    el("div", { class: "toolbar" }, el("label", {}, "Partition", partition), el("label", {}, "Read", mode),
      el("label", {}, "Order", order),
      el("label", {}, "Offset", offset), el("label", {}, "Time (local)", time),
      el("label", {}, "Per page (max 1000)", limit), el("label", {}, "Containing", contains),
      el("button", { id: "msg-load", onclick: load }, "Load")),
    results];
}

async function topicPage(name) {
  const topic = await api(`/api/topics/${encodeURIComponent(name)}`);
  const remove = el("button", { id: "delete-topic", class: "danger", onclick: async () => {
    if (!await confirmAction(`Delete topic "${name}" and all its messages?`)) return;
    try {
      await api(`/api/topics/${encodeURIComponent(name)}`, { method: "DELETE" });
      navigate("#/topics", `Topic ${name} deleted`);
    } catch (e) { showError(e.message); }
  } }, "Delete topic");
  const total = topic.partitions.reduce((sum, p) => sum + p.messages, 0);
  // Tiered storage: where the local log starts and the remote tier ends; delayed delivery:
  // the records held back and when the next is due (both only where the topic has them).
  const tierHeads = topic.tiered ? [{ label: "Local start", num: 1 }, { label: "Remote end", num: 1 }] : [];
  const heldHeads = topic.held ? [{ label: "Held", num: 1 }, "Next due"] : [];
  const extraCells = p => [
    ...(topic.tiered ? [num(p.local_start, "local-start"), num(p.remote_end, "remote-end")] : []),
    ...(topic.held ? [num(p.held, "held"),
      el("td", { class: "next-due" }, p.next_due === null ? "–" : new Date(p.next_due).toISOString())] : [])];
  const remoteCard = topic.tiered && topic.remote_size_bytes !== undefined && topic.remote_size_bytes !== null ?
    [el("div", { class: "card" }, el("div", { class: "label" }, `Remote (${topic.remote_segments} segments)`),
      el("div", { class: "big", id: "remote-size" }, formatBytes(topic.remote_size_bytes)))] : [];
  // A view (issue 18): its source, linked, and the filter it serves.
  const viewCard = topic.view_of ?
    [el("div", { class: "card" }, el("div", { class: "label" }, "View of"),
      el("div", { class: "big" }, el("a", { id: "view-of", href: `#/topics/${encodeURIComponent(topic.view_of)}` }, topic.view_of)),
      el("div", { id: "view-filter", class: "muted" }, topic.filter))] : [];
  render(`Topic ${name}`,
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "label" }, "Partitions"),
        el("div", { class: "big", id: "partition-count" }, topic.partitions.length)),
      el("div", { class: "card" }, el("div", { class: "label" }, "Messages"),
        el("div", { class: "big", id: "message-count" }, total.toLocaleString("en-US"))),
      ...remoteCard, ...viewCard,
      el("div", { class: "toolbar" }, remove)),
    el("h3", {}, "Partitions"),
    table("partitions", ["Partition", "Leader", "Replicas", "ISR", { label: "Start offset", num: 1 },
      { label: "End offset", num: 1 }, { label: "Messages", num: 1 }, { label: "Size", num: 1 },
      ...tierHeads, ...heldHeads, `Health (min ISR ${topic.min_isr})`],
      topic.partitions.map(p =>
        el("tr", { "data-partition": p.partition, class: problems(p) ? "unhealthy" : "" },
          el("td", {}, p.partition), el("td", {}, p.leader < 0 ? "none" : p.leader),
          el("td", {}, p.replicas.join(", ")), el("td", {}, p.isr.join(", ")),
          num(p.start, "start"), num(p.end, "end"), num(p.messages, "messages"), size(p.size, "size"),
          ...extraCells(p), healthCell(p)))),
    ...messageBrowser(topic),
    ...producer(topic),
    el("h3", {}, "Configuration (overrides first)"),
    configEditor(topic),
    table("configs", ["Name", "Value", "Source"],
      [...topic.configs].sort((a, b) => a.default - b.default).map(c =>
        el("tr", { "data-config": c.name, class: c.default ? "" : "override", onclick: () => {
          document.getElementById("config-name").value = c.name;  // to edit it
          document.getElementById("config-value").value = c.value ?? "";
        } },
          el("td", {}, c.name), el("td", { class: "value" }, c.value ?? "–"),
          el("td", { class: "muted" }, c.default ? "default" : c.source)))));
}

async function groupsPage() {
  const groups = await api("/api/groups");
  render("Groups", groups.length === 0 ? el("p", { class: "muted" }, "No groups.") :
    table("groups", ["Group", "Type", "State", { label: "Members", num: 1 }, { label: "Lag", num: 1 }], groups.map(g =>
      el("tr", { "data-group": g.group_id },
        el("td", {}, el("a", { href: `#/groups/${encodeURIComponent(g.group_id)}` }, g.group_id)),
        el("td", { class: "type" }, g.type),
        el("td", { class: `state state-${g.state}` }, g.state), num(g.members, "members"), num(g.lag, "lag")))));
}

async function groupPage(groupId) {
  const group = await api(`/api/groups/${encodeURIComponent(groupId)}`);
  if (group.type === "share") return shareGroupPage(groupId, group);
  const topics = [...new Set(group.offsets.map(o => o.topic))];
  const topic = el("select", { id: "reset-topic" }, topics.map(t => el("option", { value: t }, t)));
  const to = el("select", { id: "reset-to" }, el("option", { value: "earliest" }, "earliest"),
    el("option", { value: "latest" }, "latest"), el("option", { value: "offset" }, "offset"),
    el("option", { value: "datetime" }, "datetime"), el("option", { value: "shift" }, "shift by"));
  const offset = el("input", { id: "reset-offset", type: "number", min: "0", value: "0" });
  const time = el("input", { id: "reset-time", type: "datetime-local", step: "1" });
  const shift = el("input", { id: "reset-shift", type: "number", value: "-1" });
  const reset = el("button", { id: "reset-go", class: "danger", onclick: async () => {
    const when = time.value ? new Date(time.value).toISOString() : "";
    const target = { offset: `offset ${offset.value}`, datetime: `the first message at or after ${when}`,
      shift: `committed offset ${Number(shift.value) >= 0 ? "+" : ""}${shift.value}` }[to.value] ?? to.value;
    if (!await confirmAction(`Reset group "${groupId}" on topic "${topic.value}" to ${target}?`)) return;
    try {
      await api(`/api/groups/${encodeURIComponent(groupId)}/reset-offsets`, { method: "POST",
        body: JSON.stringify({ topic: topic.value, to: to.value, offset: offset.value, time: when,
          by: shift.value }) });
      showNotice(`Offsets of ${groupId} reset to ${target}`);
      await route();
    } catch (e) { showError(e.message); }
  } }, "Reset offsets");
  const remove = el("button", { id: "delete-group", class: "danger", onclick: async () => {
    if (!await confirmAction(`Delete group "${groupId}" and its committed offsets?`)) return;
    try {
      await api(`/api/groups/${encodeURIComponent(groupId)}`, { method: "DELETE" });
      navigate("#/groups", `Group ${groupId} deleted`);
    } catch (e) { showError(e.message); }
  } }, "Delete group");
  render(`Group ${groupId}`, groupCards(group, el("div", { class: "toolbar" }, remove)),
    el("h3", {}, "Members"), membersTable(group),
    el("h3", {}, "Offsets and lag"),
    table("offsets", ["Topic", "Partition", { label: "Committed", num: 1 }, { label: "End", num: 1 },
      { label: "Lag", num: 1 }], group.offsets.map(o =>
      el("tr", { "data-tp": `${o.topic}-${o.partition}` }, el("td", {}, o.topic), el("td", {}, o.partition),
        num(o.committed, "committed"), num(o.end, "end"), num(o.lag, "lag")))),
    el("h3", {}, "Reset offsets (the group must have no active members)"),
    el("div", { class: "toolbar" }, el("label", {}, "Topic", topic), el("label", {}, "To", to),
      el("label", {}, "Offset", offset), el("label", {}, "Datetime (local)", time),
      el("label", {}, "Shift by", shift), reset));
}

function groupCards(group, ...extra) {
  return el("div", { class: "cards" },
    el("div", { class: "card" }, el("div", { class: "label" }, "State"),
      el("div", { class: `big state state-${group.state}`, id: "group-state" }, group.state)),
    el("div", { class: "card" }, el("div", { class: "label" }, "Members"),
      el("div", { class: "big", id: "member-count" }, group.members.length)),
    el("div", { class: "card" }, el("div", { class: "label" }, "Total lag"),
      el("div", { class: "big", id: "group-lag" }, group.lag.toLocaleString("en-US"))),
    ...extra);
}

function membersTable(group) {
  return group.members.length === 0 ? el("p", { class: "muted", id: "no-members" }, "No active members.") :
    table("members", ["Member", "Client id", "Host", "Assignment"], group.members.map(m =>
      el("tr", { "data-member": m.member_id }, el("td", {}, m.member_id), el("td", { class: "client" }, m.client_id),
        el("td", {}, m.host), el("td", { class: "assignment" }, m.assignment.join(", ")))));
}

// A share group (KIP-932): records go to any member; per partition, the start offset below
// which every record is acknowledged or archived, and the lag (records not yet acknowledged).
function shareGroupPage(groupId, group) {
  render(`Share group ${groupId}`, groupCards(group),
    el("h3", {}, "Members"), membersTable(group),
    el("h3", {}, "Share-partitions"),
    table("offsets", ["Topic", "Partition", { label: "Start offset", num: 1 }, { label: "Lag", num: 1 }],
      group.offsets.map(o =>
        el("tr", { "data-tp": `${o.topic}-${o.partition}` }, el("td", {}, o.topic), el("td", {}, o.partition),
          num(o.start_offset, "start"), num(o.lag, "lag")))));
}

function drawChart(canvas, points) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = canvas.clientHeight;
  canvas.width = width * ratio; canvas.height = height * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, height);
  const pad = { left: 70, right: 16, top: 16, bottom: 28 };
  const max = Math.max(10, ...points.map(p => p.rate));
  const x = i => pad.left + (width - pad.left - pad.right) * (i / Math.max(59, 1));
  const y = v => height - pad.bottom - (height - pad.top - pad.bottom) * (v / max);
  g.strokeStyle = "#dde2ea"; g.fillStyle = "#6b7385"; g.font = "12px system-ui"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4;
    g.beginPath(); g.moveTo(pad.left, y(v)); g.lineTo(width - pad.right, y(v)); g.stroke();
    g.fillText(Math.round(v).toLocaleString("en-US"), 8, y(v) + 4);
  }
  g.fillText("messages/s, last 60 s", pad.left, height - 8);
  if (points.length < 2) return;
  const offset = 60 - points.length;
  g.strokeStyle = "#2f6fde"; g.lineWidth = 2; g.beginPath();
  points.forEach((p, i) => (i ? g.lineTo : g.moveTo).call(g, x(i + offset), y(p.rate)));
  g.stroke();
}

async function throughputPage() {
  const canvas = el("canvas", { id: "chart" });
  const rate = el("div", { class: "big", id: "rate" }, "–");
  const total = el("div", { class: "big", id: "total-end" }, "–");
  const perTopic = el("div", { id: "topic-rates" });
  render("Throughput",
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "label" }, "Messages in / s"), rate),
      el("div", { class: "card" }, el("div", { class: "label" }, "Messages written (sum of end offsets)"), total)),
    canvas, el("h3", {}, "Per topic (messages/s)"), perTopic);
  const points = [];
  let last = null;
  const sample = async () => {
    try {
      const now = await api("/api/throughput");
      const sum = Object.values(now.topics).reduce((a, b) => a + b, 0);
      total.textContent = sum.toLocaleString("en-US");
      if (last) {
        const seconds = Math.max((now.time_ms - last.time_ms) / 1000, 0.001);
        const lastSum = Object.values(last.topics).reduce((a, b) => a + b, 0);
        points.push({ rate: Math.max(sum - lastSum, 0) / seconds });
        if (points.length > 60) points.shift();
        canvas.dataset.peak = String(Math.max(...points.map(p => p.rate)));
        rate.textContent = Math.round(points[points.length - 1].rate).toLocaleString("en-US");
        perTopic.replaceChildren(table("topic-rate-table", ["Topic", { label: "Messages/s", num: 1 },
          { label: "End offset sum", num: 1 }], Object.entries(now.topics).map(([name, end]) =>
          el("tr", { "data-topic": name }, el("td", {}, name),
            num(Math.round(Math.max(end - (last.topics[name] ?? end), 0) / seconds), "rate"),
            num(end, "end")))));
      }
      last = now;
      view.dataset.samples = String(points.length);
      drawChart(canvas, points);
    } catch (e) { showError(e.message); }
  };
  await sample();
  timer = setInterval(sample, 1000);
}

// -- routing ----------------------------------------------------------------------------

async function route() {
  if (timer) { clearInterval(timer); timer = null; }
  showError("");
  const parts = (location.hash.replace(/^#\/?/, "") || "brokers").split("/").map(decodeURIComponent);
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("active", link.dataset.nav === parts[0]);
  }
  try {
    if (parts[0] === "topics" && parts[1]) await topicPage(parts[1]);
    else if (parts[0] === "topics") await topicsPage();
    else if (parts[0] === "groups" && parts[1]) await groupPage(parts[1]);
    else if (parts[0] === "groups") await groupsPage();
    else if (parts[0] === "throughput") await throughputPage();
    else await brokersPage();
  } catch (e) {
    render("Error");
    showError(e.message);
  }
}

// A notice for the page navigated to (a hash change clears the previous page's notice).
let pendingNotice = "";

function navigate(hash, notice) {
  pendingNotice = notice;
  location.hash = hash;
}

window.addEventListener("hashchange", () => { showNotice(pendingNotice); pendingNotice = ""; route(); });
route();
