// Drawing helpers of the web view: elements made from text only, never
// from markup (innerHTML is used nowhere), so no name or id a client wrote
// can run as script.

export const $ = (id) => document.getElementById(id);

// Text only (never innerHTML): names and ids are whatever clients wrote.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  // Any depth of nesting: a part built as [text, element] inside another
  // list is drawn as its parts, never as "a,[object HTMLElement]".
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// A name others wrote, isolated: a right-to-left override in it reorders
// nothing around it.
export const bdi = (text, attrs) => h('bdi', attrs || {}, text);

export function setStatus(text, error = false) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('error', error);
}

export function fail(target, err) {
  target.replaceChildren(h('p', { class: 'error', role: 'alert' },
    `Request failed: ${err.message}`));
}

export const fmt = (n) => (Number.isInteger(n) ? n : Number(n.toFixed(2)))
  .toLocaleString('en-US');

export const clock = (d) => d.toLocaleTimeString('en-GB');
