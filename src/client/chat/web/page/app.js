// The e2e-chat web page. Everything it shows comes from the local server's view
// (/api/view, long-polled); everything typed goes to /api/line, as a line typed in chat mode.
// Texts from the network are set with textContent, never parsed as HTML.
"use strict";

const state = { instance: "", version: 0, view: null, replyTo: null, openKey: null, stick: true, media: new Map(), drawnMedia: new Map(), announced: new Map() };
const $ = (id) => document.getElementById(id);

function el(tag, props, children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children || []) if (c) node.append(c);
  return node;
}

function banner(text) {
  const b = $("banner");
  b.hidden = !text;
  b.textContent = text || "";
}

// What went wrong with something the person did: stays until dismissed (the banner is the
// connection's, redrawn with every view).
function notice(text) {
  $("notice").hidden = false;
  $("notice-text").textContent = text;
}

async function sendLine(text) {
  try {
    const r = await fetch("/api/line", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text }),
      credentials: "same-origin",
    });
    if (!r.ok) notice("The chat server refused that: " + (await r.text()));
  } catch (e) {
    notice("The chat server is not answering; what you typed was not taken. Is e2e-chat web running?");
  }
}

// Long polling: each answer is the whole view; the next poll waits for a newer one.
async function follow() {
  let delay = 500;
  for (;;) {
    try {
      const q = new URLSearchParams({ instance: state.instance, after: String(state.version) });
      const r = await fetch("/api/view?" + q, { credentials: "same-origin" });
      if (r.status === 401) {
        banner("This page's session ended: open the address e2e-chat web printed.");
        await sleep(5000);
        continue;
      }
      if (!r.ok) throw new Error("status " + r.status);
      const got = await r.json();
      state.instance = got.instance;
      state.version = got.version;
      state.view = got.view;
      render(got.view);
      delay = 500;
    } catch (e) {
      banner("The local chat server is not answering (stopped or restarting); reconnecting…");
      await sleep(delay);
      delay = Math.min(delay * 2, 5000);
    }
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function render(view) {
  if (view.lost) {
    banner("Connection to the platform lost (" + view.lost + "); reconnecting… What you send waits and goes when it is back.");
  } else {
    banner("");
  }
  $("own").textContent = "you are @" + view.own;
  renderConversations(view.conversations);
  $("title").textContent = view.open.name;
  $("who-button").textContent = view.open.key.startsWith("group:") ? "Members" : "Who is this?";
  $("about").textContent = view.about;
  document.title = view.open.name + " · e2e-chat";
  renderMessages(view.open.key, view.open.entries);
  announce(view.open.key, view.open.entries);
  if (view.open.key !== state.openKey) {
    state.openKey = view.open.key;
    // A dialog's key may have changed (the warning stops sending); a group's panel is asked for.
    if (view.open.key.startsWith("user:")) {
      loadIdentity(false);
    } else {
      showChanged(null);
    }
  }
  renderReplyKeyboard(view.open.reply_keyboard);
  renderInline(view.open.inline);
  $("hint").hidden = !view.hint;
  $("hint").textContent = view.hint || "";
}

function renderConversations(list) {
  const ul = $("conversation-list");
  ul.replaceChildren(
    ...list.map((c) =>
      el("li", {}, [
        el(
          "button",
          {
            type: "button",
            "aria-current": String(c.open),
            "data-key": c.key,
            onclick: () => sendLine("/switch " + c.switch_to),
          },
          [el("span", { text: c.name }), c.unread > 0 ? el("span", { class: "unread", text: String(c.unread), "aria-label": c.unread + " unread" }) : null],
        ),
      ]),
    ),
  );
}

// A screen reader hears the newest message a peer sent since the last drawing, not the whole
// conversation drawn again (the list is replaced on every change, so it is no live region).
function announce(key, entries) {
  const peer = entries.filter((e) => e.note === undefined && e.from !== null && e.id !== null);
  const newest = peer.length ? peer[peer.length - 1] : null;
  const seen = state.announced.get(key);
  state.announced.set(key, newest ? newest.id : 0);
  if (seen === undefined || !newest || newest.id <= seen) return;
  const [text] = caption(newest);
  $("announce").textContent = newest.from + ": " + (newest.poll ? "poll, " + newest.poll.question : text);
}

// An album's messages (one media_group_id, one after another) share one grid.
function renderMessages(key, entries) {
  const ol = $("messages");
  const atBottom = state.openKey !== key || ol.scrollHeight - ol.scrollTop - ol.clientHeight < 40;
  const items = [];
  state.drawnMedia = new Map();
  let album = null;
  for (const e of entries) {
    const id = e.media && e.media.album;
    const node = entry(key, e);
    if (id && album && album.dataset.album === id) {
      album.append(node);
      continue;
    }
    if (id) {
      album = el("li", { class: "album-grid", "data-album": id }, [node]);
      items.push(album);
      continue;
    }
    album = null;
    items.push(node);
  }
  ol.replaceChildren(...items);
  state.media = state.drawnMedia;
  state.stick = atBottom;
  if (atBottom) ol.scrollTop = ol.scrollHeight;
}

// A picture or player that loads later grows its message: the view stays at the bottom if it
// was there.
function grown() {
  const ol = $("messages");
  if (state.stick) ol.scrollTop = ol.scrollHeight;
}

function time(t) {
  return new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function entry(key, e) {
  if (e.note !== undefined) {
    return el("li", { class: e.alert ? "note alert" : "note" }, [el("span", { class: "meta", text: time(e.time) + " " }), el("span", { text: e.note })]);
  }
  const own = e.from === null;
  const classes = ["message", own ? "own" : "peer"];
  if (e.deleted) classes.push("deleted");
  const li = el("li", { class: classes.join(" ") });
  if (e.id !== null) li.dataset.id = String(e.id);
  if (e.quote) {
    li.append(el("div", { class: "quote", text: e.quote.from ? e.quote.from + ": " + e.quote.text : "reply to #" + e.quote.id }));
  }
  li.append(el("div", { class: "meta" }, [el("span", { class: "from", text: own ? "you" : e.from }), " · " + time(e.time)]));
  if (e.media && e.id !== null && !e.deleted) li.append(mediaNode(key, e));
  if (e.poll && e.id !== null) {
    // The poll is drawn; the text is its description for a terminal.
    li.append(pollView(e));
  } else if (e.contact) {
    li.append(contactCard(e.contact));
  } else {
    const [text, entities] = caption(e);
    li.append(body(text, entities));
  }
  if (e.location) {
    const { latitude: lat, longitude: lon } = e.location;
    const map = "https://www.openstreetmap.org/?mlat=" + lat + "&mlon=" + lon + "#map=16/" + lat + "/" + lon;
    li.append(el("a", { class: "map", href: map, target: "_blank", rel: "noopener noreferrer", text: "Open " + lat.toFixed(5) + ", " + lon.toFixed(5) + " on a map ↗" }));
  }
  li.append(marks(e));
  for (const a of e.about) li.append(el("div", { class: "about", text: a }));
  if (e.keyboard.length) li.append(inlineKeyboard(e));
  return li;
}

// A file's message text is "[kind name] caption" for a terminal; the page shows the file, so
// the caption alone (entities shifted with it).
function caption(e) {
  if (!e.media) return [e.text, e.entities];
  const label = "[" + e.media.kind + " " + e.media.file_name + "]";
  if (!e.text.startsWith(label)) return [e.text, e.entities];
  const cut = e.text.startsWith(label + " ") ? label.length + 1 : label.length;
  const entities = e.entities.filter((x) => x.offset >= cut).map((x) => Object.assign({}, x, { offset: x.offset - cut }));
  return [e.text.slice(cut), entities];
}

// A message's file keeps its element from one drawing to the next: every answer is no-store,
// so a new element would fetch the file again (the server downloads and checks it whole each
// time), and a player would stop.
function mediaNode(key, e) {
  const id = [key, e.id, e.media.file_name, e.media.size].join("#");
  const node = state.media.get(id) || media(key, e);
  state.drawnMedia.set(id, node);
  return node;
}

// A file is fetched from the local server, which checks it whole and decrypts it; an image,
// audio or video type shows inline, anything else is a download.
function media(key, e) {
  const m = e.media;
  const src = "/api/file?" + new URLSearchParams({ chat: key, id: String(e.id) });
  const div = el("div", { class: "media" });
  const type = m.mime_type || "";
  if (/^image\/(jpeg|png|gif|webp)$/.test(type)) {
    div.append(el("img", { src, alt: m.kind + " " + m.file_name, loading: "lazy", class: m.kind === "sticker" ? "sticker" : "", onload: grown }));
  } else if (/^video\/(mp4|webm|ogg)$/.test(type)) {
    // A video note is drawn round, as messengers show one.
    const video = el("video", { src, controls: "", preload: "metadata", "aria-label": m.kind + " " + m.file_name, class: m.kind === "video_note" ? "round" : "", onloadedmetadata: grown });
    if (m.kind === "animation" || m.kind === "sticker") {
      video.muted = true;
      video.loop = true;
      video.autoplay = true;
    }
    div.append(video);
  } else if (/^audio\//.test(type)) {
    div.append(el("audio", { src, controls: "", preload: "metadata", "aria-label": m.kind + " " + m.file_name }));
  }
  div.append(el("a", { href: src, download: m.file_name, text: "⬇ " + m.file_name + " (" + size(m.size) + ")" }));
  return div;
}

// A shared contact as a card: the name, the phone number, and whose account it is.
function contactCard(c) {
  const name = [c.first_name, c.last_name].filter((x) => x).join(" ");
  return el("div", { class: "contact", role: "group", "aria-label": "Contact: " + name }, [
    el("div", { class: "meta", text: "Contact" }),
    el("div", { class: "name", text: name }),
    c.phone_number ? el("div", { text: c.phone_number }) : null,
    c.user_id ? el("div", { class: "meta", text: "account " + c.user_id }) : null,
  ]);
}

function size(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

// A poll's options as buttons (one vote), or as boxes and a Vote button (several).
function pollView(e) {
  const p = e.poll;
  const div = el("div", { class: "poll", role: "group", "aria-label": "Poll: " + p.question }, [
    el("div", { class: "question", text: (p.quiz ? "Quiz: " : "Poll: ") + p.question + (p.closed ? " (closed)" : "") }),
  ]);
  if (p.multiple && !p.closed) {
    const boxes = p.options.map((o, i) => {
      const box = el("input", { type: "checkbox", id: "poll-" + e.id + "-" + i, value: String(i + 1) });
      box.checked = e.voted.includes(i);
      div.append(el("div", {}, [box, el("label", { for: box.id, text: " " + o.text + " · " + o.voters })]));
      return box;
    });
    div.append(el("button", { type: "button", text: "Vote", onclick: () => sendLine(("/vote " + e.id + " " + boxes.filter((b) => b.checked).map((b) => b.value).join(" ")).trim()) }));
  } else {
    p.options.forEach((o, i) => {
      const chosen = e.voted.includes(i);
      const button = el("button", { type: "button", class: chosen ? "option chosen" : "option", "data-n": String(i + 1), "aria-pressed": String(chosen), onclick: () => sendLine("/vote " + e.id + " " + (i + 1)) }, [
        el("span", { text: (chosen ? "✓ " : "") + o.text }),
        el("span", { text: String(o.voters) }),
      ]);
      button.disabled = p.closed;
      div.append(button);
    });
  }
  return div;
}

function marks(e) {
  const span = el("span", { class: "marks" });
  if (e.id !== null) span.append("#" + e.id);
  if (e.edited && !e.deleted) span.append(" (edited)");
  if (e.deleted) span.append(" (deleted)");
  const states = {
    pending: ["⧗ sending", "pending"],
    waiting: ["⧗ waiting for the platform", "pending"],
    sent: ["✓", "sent"],
    failed: ["✗ not sent: " + (e.failed || ""), "failed"],
  };
  if (e.state && states[e.state]) span.append(" ", el("span", { class: states[e.state][1], text: states[e.state][0] }));
  if (e.id !== null && !e.deleted) {
    const actions = el("span", { class: "actions" }, [
      el("button", { type: "button", text: "reply", "aria-label": "Reply to #" + e.id, onclick: () => startReply(e) }),
    ]);
    // Only a text of ours is edited (a file, poll, contact or place is not).
    if (e.from === null && !e.media && !e.poll && !e.contact && !e.location) {
      actions.append(el("button", { type: "button", text: "edit", "aria-label": "Edit #" + e.id, onclick: () => editOwn(e) }));
    } else {
      actions.append(el("button", { type: "button", text: "👍", "aria-label": "React to #" + e.id, onclick: () => sendLine("/react " + e.id + " 👍") }));
    }
    span.append(actions);
  }
  return span;
}

const ENTITY_CLASSES = { bold: "b", italic: "i", underline: "u", strikethrough: "s", code: "code", pre: "code", spoiler: "spoiler" };
const SAFE_SCHEMES = ["http:", "https:", "mailto:"];

function safeHref(url) {
  try {
    const u = new URL(url);
    return SAFE_SCHEMES.includes(u.protocol) ? u.href : null;
  } catch (e) {
    return null;
  }
}

// The text in runs cut at every entity's ends (offsets count UTF-16 units, as JavaScript's
// strings do); a link is an <a> only for http(s) and mailto, and a text link shows its target.
function body(text, entities) {
  const div = el("div", { class: "body", dir: "auto" });
  const cuts = new Set([0, text.length]);
  for (const e of entities) {
    cuts.add(Math.min(e.offset, text.length));
    cuts.add(Math.min(e.offset + e.length, text.length));
  }
  const points = [...cuts].sort((a, b) => a - b);
  for (let i = 0; i + 1 < points.length; i++) {
    const [from, to] = [points[i], points[i + 1]];
    const covering = entities.filter((e) => e.offset <= from && to <= e.offset + e.length);
    const part = text.slice(from, to);
    const link = covering.find((e) => e.type === "text_link" || e.type === "url" || e.type === "email");
    let node;
    const href = link ? safeHref(link.type === "text_link" ? link.url : link.type === "email" ? "mailto:" + part : part) : null;
    if (href) {
      node = el("a", { href, target: "_blank", rel: "noopener noreferrer", text: part });
    } else {
      node = el("span", { text: part });
    }
    const classes = covering.map((e) => ENTITY_CLASSES[e.type]).filter(Boolean);
    if (classes.length) node.className = classes.join(" ");
    if (classes.includes("spoiler")) node.tabIndex = 0;
    div.append(node);
    for (const e of covering) {
      if (e.type === "text_link" && e.offset + e.length === to && e.url) {
        div.append(el("span", { class: "link-target", text: " <" + e.url + ">" }));
      }
    }
  }
  return div;
}

function inlineKeyboard(e) {
  return el(
    "div",
    { class: "keyboard", role: "group", "aria-label": "Buttons of #" + e.id },
    e.keyboard.map((row) =>
      el(
        "div",
        { class: "row" },
        row.map((b) => {
          if (b.url) {
            return el("button", {
              type: "button",
              class: "inline url",
              "data-n": String(b.n),
              text: b.text + " ↗",
              title: b.url,
              onclick: () => openLink(b.url),
            });
          }
          return el("button", { type: "button", class: "inline", "data-n": String(b.n), text: b.text, onclick: () => sendLine("/press " + e.id + " " + b.n) });
        }),
      ),
    ),
  );
}

function openLink(url) {
  const href = safeHref(url);
  if (!href) {
    notice("This button's link is not a web address: " + url);
    return;
  }
  if (window.confirm("Open this link in a new tab?\n\n" + href)) window.open(href, "_blank", "noopener,noreferrer");
}

function renderReplyKeyboard(k) {
  const div = $("reply-keyboard");
  div.hidden = !k;
  $("input").placeholder = (k && k.placeholder) || "Message (Enter sends, Shift+Enter a new line; /commands lists the commands)";
  if (!k) {
    div.replaceChildren();
    return;
  }
  let n = 0;
  div.replaceChildren(
    ...k.rows.map((row) =>
      el(
        "div",
        { class: "row" },
        row.map((text) => {
          n += 1;
          const number = n;
          return el("button", { type: "button", class: "reply-button", "data-n": String(number), text, onclick: () => sendLine(String(number)) });
        }),
      ),
    ),
  );
}

// An inline query's results (typed "@bot query"): choosing one sends it.
function renderInline(inline) {
  const div = $("inline-results");
  div.hidden = !inline;
  if (!inline) {
    div.replaceChildren();
    return;
  }
  div.replaceChildren(
    el("div", { class: "meta", text: "Results (choose one to send it):" }),
    ...inline.results.map((r) =>
      el("button", { type: "button", class: "inline-result", "data-id": r.id, onclick: () => sendLine("/choose " + inline.session + " " + r.id) }, [
        el("span", { text: r.title || r.text || r.id }),
        r.description ? el("span", { class: "description", text: r.description }) : null,
      ]),
    ),
  );
}

function startReply(e) {
  state.replyTo = e.id;
  $("replying").hidden = false;
  $("replying-text").textContent = "Replying to #" + e.id + ": " + e.text.split("\n")[0].slice(0, 60);
  $("input").focus();
}

function stopReply() {
  state.replyTo = null;
  $("replying").hidden = true;
}

function editOwn(e) {
  const text = window.prompt("Edit your message #" + e.id, e.text);
  if (text !== null && text.trim() !== "") sendLine("/edit " + e.id + " " + text);
}

function submit(event) {
  event.preventDefault();
  const input = $("input");
  const text = input.value;
  if (text.trim() === "") return;
  input.value = "";
  if (state.replyTo !== null) {
    sendLine("/reply " + state.replyTo + " " + text);
    stopReply();
  } else {
    sendLine(text);
  }
}

// Files: picked or dropped, each staged on the local server, then sent together (an album when
// there are two to ten).
async function sendFiles(files) {
  const list = [...files].slice(0, 10);
  if (!list.length) return;
  const ids = [];
  for (const f of list) {
    const r = await fetch("/api/stage?" + new URLSearchParams({ name: f.name }), { method: "POST", body: f, credentials: "same-origin" });
    if (!r.ok) {
      notice("The file " + f.name + " was not taken: " + (await r.text()));
      return;
    }
    ids.push((await r.json()).id);
  }
  const r = await fetch("/api/send-files", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ids, caption: "" }),
    credentials: "same-origin",
  });
  if (!r.ok) notice("The files were not sent: " + (await r.text()));
}

// The "who is this" panel; a changed key shows it at once and stops sending until trusted.
async function loadIdentity(show) {
  let id;
  try {
    const r = await fetch("/api/identity", { credentials: "same-origin" });
    id = await r.json();
  } catch (e) {
    return;
  }
  const changed = showChanged(id);
  if (show || changed) showIdentity(id);
}

// The warning of a changed key (none: no dialog's), which stops sending until it is trusted.
function showChanged(id) {
  const changed = !!id && !id.group && !!(id.changed_to || id.name_was);
  $("changed").hidden = !changed;
  $("changed").textContent = changed ? "Warning: the platform now serves another key or account for @" + id.username + ". Sending is stopped until you compare and trust it (Who is this?)." : "";
  $("send").disabled = changed;
  $("input").disabled = changed;
  return changed;
}

function showIdentity(id) {
  const facts = $("who-facts");
  facts.replaceChildren();
  const fact = (term, value) => facts.append(el("dt", { text: term }), el("dd", { text: value }));
  $("who-title").textContent = id.group ? "Who is in " + id.title + "?" : "Who is this?";
  if (id.group) {
    fact(id.channel ? "Channel" : "Group", id.title);
    fact("Members", id.members.length + ", as the platform lists them; a message goes to the devices in this device's tree");
    for (const m of id.members) {
      const devices = m.devices === 0 ? "no device in the tree yet" : m.devices === 1 ? "1 device" : m.devices + " devices";
      fact("@" + m.username + (m.is_bot ? " (bot)" : ""), m.role + " · " + devices);
    }
  } else {
    fact("Name", "@" + id.username + " · user " + id.user_id);
    fact(id.is_bot ? "Bot ID" : "Identity key", id.key);
    fact(id.is_bot ? "Bot ID, short form" : "Safety number", id.readable);
    fact("Verified", id.verified_at ? "yes, on " + new Date(id.verified_at * 1000).toLocaleString() : "not yet: compare the above with what the other side shows");
  }
  const changed = !id.group && (id.changed_to || id.name_was);
  $("who-warning").hidden = !changed;
  $("who-warning").textContent = id.changed_to ? "The platform serves another key: " + id.changed_to : id.name_was ? "This name was user " + id.name_was + " when you met it." : "";
  $("who-verify").hidden = id.group || !!changed;
  $("who-trust").hidden = !changed;
  if (!$("who").open) $("who").showModal();
}

async function identityAction(action) {
  const r = await fetch("/api/identity", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ action }),
    credentials: "same-origin",
  });
  if (!r.ok) {
    $("who-warning").hidden = false;
    $("who-warning").textContent = await r.text();
    return;
  }
  const id = await r.json();
  showChanged(id);
  showIdentity(id);
}

document.addEventListener("DOMContentLoaded", () => {
  $("notice-close").addEventListener("click", () => ($("notice").hidden = true));
  $("messages").addEventListener("scroll", () => {
    const ol = $("messages");
    state.stick = ol.scrollHeight - ol.scrollTop - ol.clientHeight < 40;
  });
  $("who-button").addEventListener("click", () => loadIdentity(true));
  $("who-close").addEventListener("click", () => $("who").close());
  $("who-verify").addEventListener("click", () => identityAction("verify"));
  $("who-trust").addEventListener("click", () => identityAction("trust"));
  $("file").addEventListener("change", (event) => {
    sendFiles(event.target.files);
    event.target.value = "";
  });
  const chat = $("chat");
  chat.addEventListener("dragover", (event) => {
    event.preventDefault();
    chat.classList.add("dropping");
  });
  chat.addEventListener("dragleave", () => chat.classList.remove("dropping"));
  chat.addEventListener("drop", (event) => {
    event.preventDefault();
    chat.classList.remove("dropping");
    sendFiles(event.dataTransfer.files);
  });
  $("composer").addEventListener("submit", submit);
  $("replying-cancel").addEventListener("click", stopReply);
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) submit(event);
  });
  $("input").focus();
  follow();
});
