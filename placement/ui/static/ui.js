// The web view: plain DOM, no framework, no build step. Every number comes
// from the JSON API, called with the visitor's token; this file holds no
// data.
//
// Live: every provider with its inventories, usage, traits and aggregates
// comes in one answer (GET /ops/ui/providers), then every POLL_MS only the
// providers changed since (?since=<token>, from the service's change
// counters), so a write made anywhere shows within seconds for two tiny
// queries on the server. When the server does not answer, the page says
// its data is as of the last answer, and catches up by itself.
//
// Scale: the tree is virtualised (only the rows in view are in the DOM);
// filters, sorting and roll-ups run over the providers in memory.
//
// Requests go through session.js, which drops the answers of a session
// that ended (Disconnect, another token) before anything here sees them;
// elements are made by dom.js's h(), from text only.

import {
  api, dec, enc, endSession, refused, segments, session,
} from './session.js';
import {
  $, bdi, clock, fail, fmt, h, setStatus,
} from './dom.js';
import * as trees from './trees.js';
import {
  aggregateParts, capacity, ownSums, pctOf, rollup, rootOf,
  rowPeak, rowSums, store, sumOver,
} from './trees.js';

const ROW_H = 32;
const OVERSCAN = 6;
const POLL_MS = 2000;
const POLL_HIDDEN_MS = 10000;   // a tab nobody looks at asks less often
const POLL_UNCOUNTED_MS = 30000;  // a database without change counters
const RETRY_MAX_MS = 10000;
const HIGH_PCT = 90;
const MEMBERS_SHOWN = 200;   // an aggregate's members drawn at first
const TOKEN_KEY = 'placement-ui-token';

export const stats = { polls: 0, pollErrors: 0 };
window.placementUI = { stats };

session.token = sessionStorage.getItem(TOKEN_KEY) || '';

const state = {
  noauth2: false,
  connected: false,
  dataToken: null,        // the change counters our data reflects
  counted: true,
  asOf: null,             // Date of the last answer
  lastError: null,
  retryMs: POLL_MS,
  pollTimer: null,
  expanded: new Set(),
  filter: { text: '', rc: '', trait: '', agg: '', pct: null },
  sort: 'name',
  aggregateSort: 'name',  // an aggregate's members: by name or fullest
  aggregateAll: null,     // the aggregate whose members are all shown
  rows: [],               // [{rp, depth}] in display order
  focus: 0,
  selected: null,
  consumersOf: new Map(),  // uuid -> its consumers, as last loaded
  view: 'providers',
};

function providerName(uuid) {
  const rp = store.byUuid.get(uuid);
  return rp ? rp.name : uuid;
}

// Links within the page: each part of the address percent-encoded on its
// own (an aggregate id read from the database may hold "/", "#" or "?").
const providerHash = (uuid) => `#${segments('provider', uuid)}`;
const aggregateHash = (agg) => `#${segments('aggregate', agg)}`;

function providerLink(uuid) {
  return h('a', { href: providerHash(uuid) }, bdi(providerName(uuid)));
}

function resourcesText(resources) {
  return Object.entries(resources).sort()
    .map(([rc, n]) => `${rc}: ${fmt(n)}`).join(', ');
}

// --- the filters' choices ---------------------------------------------------

function fillSelects() {
  fillSelect('filter-rc', store.classes);
  fillSelect('filter-trait', store.traits);
  fillSelect('filter-agg', store.aggregates);
}

function fillSelect(id, values) {
  const sel = $(id);
  const sig = values.join('\n');
  if (sel.dataset.sig === sig) return;
  const keep = sel.value;
  sel.replaceChildren(h('option', { value: '' }, 'any'),
    ...values.map((v) => h('option', { value: v }, v)));
  sel.value = values.includes(keep) ? keep : '';
  sel.dataset.sig = sig;
}

// --- loading and staying live ----------------------------------------------------

function applyAnswer(body) {
  const changed = trees.apply(body);
  state.dataToken = body.token;
  state.counted = body.token !== null;
  if (body.full || changed.size) fillSelects();
  return changed;
}

async function loadProviders() {
  setStatus('Loading providers…');
  const t0 = performance.now();
  const body = await api('ops/ui/providers');
  stats.listMs = performance.now() - t0;
  trees.clear();
  applyAnswer(body);
  state.connected = true;
  markFresh();
  rebuildRows();
  requestAnimationFrame(() => {
    performance.mark('ui-tree-painted');
    stats.treePaintedMs = performance.now();
  });
}

function treeStatus() {
  setStatus(`${store.byUuid.size} providers in ${store.roots.length} trees`);
}

function markFresh() {
  state.asOf = new Date();
  state.lastError = null;
  state.retryMs = POLL_MS;
  document.body.classList.remove('stale');
  const el = $('freshness');
  el.classList.remove('error');
  el.removeAttribute('role');
  el.textContent = `as of ${clock(state.asOf)}` +
    (state.counted ? '' : ' (this database does not count its changes: ' +
      `refreshed every ${POLL_UNCOUNTED_MS / 1000} s)`);
  treeStatus();
}

function markStale(err) {
  const first = state.lastError === null;
  state.lastError = err;
  document.body.classList.add('stale');
  const el = $('freshness');
  el.classList.add('error');
  if (first) el.setAttribute('role', 'alert');
  const why = err.status ? `answers ${err.message}` : 'unreachable';
  el.textContent = `Server ${why}: data as of ${clock(state.asOf)} ` +
    'may be stale; retrying…';
}

function schedulePoll(ms) {
  clearTimeout(state.pollTimer);
  if (!state.connected) return;
  state.pollTimer = setTimeout(poll, ms);
}

function nextPollMs() {
  if (!state.counted) return POLL_UNCOUNTED_MS;
  return document.hidden ? POLL_HIDDEN_MS : POLL_MS;
}

async function poll() {
  const since = state.dataToken ? `?since=${enc(state.dataToken)}` : '';
  stats.polls += 1;
  let changed;
  try {
    const body = await api(`ops/ui/providers${since}`);
    changed = applyAnswer(body);
  } catch (err) {
    stats.pollErrors += 1;
    if (refused(err)) {
      disconnect(`Token refused (${err.message})`, true);
      return;
    }
    markStale(err);
    state.retryMs = Math.min(RETRY_MAX_MS, state.retryMs * 2);
    schedulePoll(state.retryMs);
    return;
  }
  markFresh();
  if (changed.size) {
    stats.lastChangeAt = performance.now();
    showChanges(changed);
  }
  schedulePoll(nextPollMs());
}

// Redraw what shows the providers that changed.
function showChanges(changed) {
  if (state.selected && !store.byUuid.has(state.selected)) {
    state.selected = null;
    $('detail').replaceChildren(h('p', { class: 'muted' },
      'That provider was deleted.'));
  }
  rebuildRows();
  if (state.view === 'providers' && state.selected &&
      (changed.has(state.selected) || [...changed].some(
        (u) => store.byUuid.has(u) && rootOf(store.byUuid.get(u))
          === rootOf(store.byUuid.get(state.selected))))) {
    showProvider(state.selected, true);
  }
  if (state.view === 'totals') showTotals();
  if (state.view === 'aggregates') route();
  if (state.view === 'consumer' || state.view === 'usages') route(true);
}

// --- the provider tree ----------------------------------------------------

function filtering() {
  const f = state.filter;
  return Boolean(f.text || f.rc || f.trait || f.agg || f.pct !== null);
}

// Siblings in display order (trees.ordered: by name, or fullest first).
const ordered = (list) => trees.ordered(list, state.sort, state.filter.rc);

function rebuildRows() {
  const rows = [];
  const total = store.byUuid.size;
  if (!filtering()) {
    const walk = (rp, depth) => {
      rows.push({ rp, depth });
      if (state.expanded.has(rp.uuid)) {
        for (const c of ordered(store.children.get(rp.uuid) || [])) {
          walk(c, depth + 1);
        }
      }
    };
    for (const r of ordered(store.roots)) walk(r, 0);
    $('tree-count').textContent = `${total} providers, ` +
      `${store.roots.length} trees`;
  } else {
    // Matches with their ancestors, so each match is seen in its tree.
    const keep = new Set();
    const inTrees = new Set();
    const matched = new Set();
    let count = 0;
    for (const rp of store.sorted) {
      if (!trees.matches(rp, state.filter)) continue;
      count += 1;
      inTrees.add(rootOf(rp).uuid);
      matched.add(rp.uuid);
      let cur = rp;
      while (cur && !keep.has(cur.uuid)) {
        keep.add(cur.uuid);
        cur = store.byUuid.get(cur.parent);
      }
    }
    // An ancestor shown only to place a match is marked as such.
    const walk = (rp, depth) => {
      rows.push({ rp, depth, context: !matched.has(rp.uuid) });
      for (const c of ordered(store.children.get(rp.uuid) || [])) {
        if (keep.has(c.uuid)) walk(c, depth + 1);
      }
    };
    for (const r of ordered(store.roots)) if (keep.has(r.uuid)) walk(r, 0);
    $('tree-count').textContent = `${count} of ${total} providers match, ` +
      `in ${inTrees.size} tree${inTrees.size === 1 ? '' : 's'}`;
  }
  state.rows = rows;
  state.focus = Math.min(state.focus, Math.max(rows.length - 1, 0));
  $('tree-spacer').style.height = `${rows.length * ROW_H}px`;
  renderRows();
}

function expandedIn(rp) {
  return filtering() ? true : state.expanded.has(rp.uuid);
}

// Rows are kept across redraws while what they show is unchanged: the
// focused row keeps its focus and a screen reader is not told anew.
let rowCache = new Map();    // uuid -> row element

function renderRows() {
  const tree = $('tree');
  const first = Math.max(0, Math.floor(tree.scrollTop / ROW_H) - OVERSCAN);
  const last = Math.min(state.rows.length,
    Math.ceil((tree.scrollTop + tree.clientHeight) / ROW_H) + OVERSCAN);
  const out = [];
  const focusWasInTree = tree.contains(document.activeElement);
  const cache = new Map();
  let focusEl = null;
  for (let i = first; i < last; i += 1) {
    const { rp, depth, context } = state.rows[i];
    const kids = store.children.get(rp.uuid);
    const open = expandedIn(rp);
    // A row with children shows its tree's sums: a write on a child
    // changes them, not the row's own provider.
    const sums = kids ? rollup(rp.uuid) : ownSums(rp);
    const sig = `${i}|${depth}|${open}|${Boolean(context)}|${rp.version}|` +
      `${kids ? kids.length : 0}` +
      `|${sumsSig(sums)}`;
    let row = rowCache.get(rp.uuid);
    if (!row || row.dataset.sig !== sig) {
      row = h('div', {
        class: context ? 'row context' : 'row', role: 'treeitem',
        id: `rp-${rp.uuid}`,
        'data-uuid': rp.uuid, 'data-index': i, 'data-sig': sig,
        'aria-level': depth + 1,
        'aria-expanded': kids ? String(open) : null,
      },
      h('span', { class: 'toggle', 'aria-hidden': 'true' },
        kids ? (open ? '▾' : '▸') : ''),
      bdi(rp.name, { class: 'name', title: rp.name }),
      h('span', { class: 'uuid' }, rp.uuid.slice(0, 8)),
      miniBars(sums, kids));
      row.style.top = `${i * ROW_H}px`;
      row.style.paddingLeft = `${0.3 + depth * 1.2}rem`;
    }
    row.setAttribute('aria-selected', String(state.selected === rp.uuid));
    row.tabIndex = i === state.focus ? 0 : -1;
    if (i === state.focus) focusEl = row;
    cache.set(rp.uuid, row);
    out.push(row);
  }
  rowCache = cache;
  // Move only what changed place; drop what left the view.
  const spacer = $('tree-spacer');
  let ref = spacer.firstChild;
  for (const el of out) {
    if (el === ref) {
      ref = ref.nextSibling;
    } else {
      spacer.insertBefore(el, ref);
    }
  }
  while (ref) {
    const next = ref.nextSibling;
    ref.remove();
    ref = next;
  }
  if (focusWasInTree && focusEl && document.activeElement !== focusEl) {
    focusEl.focus({ preventScroll: true });
  }
}

const sumsSig = (sums) => Object.entries(sums)
  .map(([rc, [cap, used]]) => `${rc}:${used}/${cap}`).join(',');

// A row's bars: its own inventory; for a provider with children, what its
// whole tree holds and uses (a compute node with NUMA children has
// nothing of its own), marked as such.
function miniBars(sums, kids) {
  const bars = Object.entries(sums).sort().map(([rc, [cap, used]]) => {
    const pct = pctOf(used, cap);
    const fill = h('span', { class: pct >= HIGH_PCT ? 'high' : null });
    fill.style.width = `${Math.min(100, pct)}%`;
    return h('span', {
      class: 'mini-wrap', 'data-rc': rc, 'data-pct': Math.round(pct),
      title: `${kids ? 'tree ' : ''}${rc} ${fmt(used)} of ${fmt(cap)}`,
    },
    h('span', { class: 'mini-rc' }, shortClass(rc)),
    h('span', { class: 'mini' }, fill));
  });
  return h('span', {
    class: `minis${kids ? ' rollup' : ''}`, 'aria-hidden': 'true',
  }, kids && bars.length ? h('span', { class: 'sigma' }, 'Σ') : null, bars);
}

const SHORT = { MEMORY_MB: 'MEM', DISK_GB: 'DISK', SRIOV_NET_VF: 'VF' };
function shortClass(rc) {
  const name = SHORT[rc] || rc.replace(/^CUSTOM_/, '');
  return name.length > 8 ? `${name.slice(0, 7)}…` : name;
}

function toggle(uuid) {
  if (filtering() || !store.children.has(uuid)) return;
  if (state.expanded.has(uuid)) state.expanded.delete(uuid);
  else state.expanded.add(uuid);
  rebuildRows();
}

function moveFocus(index) {
  if (!state.rows.length) return;
  state.focus = Math.max(0, Math.min(state.rows.length - 1, index));
  const tree = $('tree');
  const top = state.focus * ROW_H;
  if (top < tree.scrollTop) tree.scrollTop = top;
  else if (top + ROW_H > tree.scrollTop + tree.clientHeight) {
    tree.scrollTop = top + ROW_H - tree.clientHeight;
  }
  renderRows();
  const el = $('tree-spacer').querySelector(`[data-index="${state.focus}"]`);
  if (el) el.focus({ preventScroll: true });
}

function onTreeKey(ev) {
  const row = state.rows[state.focus];
  if (!row) return;
  const { rp } = row;
  const kids = store.children.get(rp.uuid);
  switch (ev.key) {
    case 'ArrowDown': moveFocus(state.focus + 1); break;
    case 'ArrowUp': moveFocus(state.focus - 1); break;
    case 'Home': moveFocus(0); break;
    case 'End': moveFocus(state.rows.length - 1); break;
    case 'PageDown': moveFocus(state.focus + 10); break;
    case 'PageUp': moveFocus(state.focus - 10); break;
    case 'ArrowRight':
      if (kids && !expandedIn(rp)) { toggle(rp.uuid); moveFocus(state.focus); }
      else if (kids) moveFocus(state.focus + 1);
      break;
    case 'ArrowLeft':
      if (kids && expandedIn(rp) && !filtering()) {
        toggle(rp.uuid); moveFocus(state.focus);
      } else if (rp.parent) {
        const p = state.rows.findIndex((r) => r.rp.uuid === rp.parent);
        if (p >= 0) moveFocus(p);
      }
      break;
    case 'Enter':
      toggle(rp.uuid);
      select(rp.uuid);
      moveFocus(state.focus);
      break;
    case ' ':
      select(rp.uuid);
      break;
    default:
      return;
  }
  ev.preventDefault();
}

// A click does what Enter does: expand (or close) and show the provider.
function onTreeClick(ev) {
  const row = ev.target.closest('.row');
  if (!row) return;
  const i = Number(row.dataset.index);
  state.focus = i;
  toggle(row.dataset.uuid);
  select(row.dataset.uuid);
  moveFocus(i);
}

function onFilter() {
  const t0 = performance.now();
  const pct = $('filter-pct').value.trim();
  state.filter = {
    text: $('search').value.trim().toLowerCase(),
    rc: $('filter-rc').value,
    trait: $('filter-trait').value,
    agg: $('filter-agg').value,
    pct: pct === '' || Number.isNaN(Number(pct)) ? null : Number(pct),
  };
  state.sort = $('sort').value;
  state.focus = 0;
  $('tree').scrollTop = 0;
  rebuildRows();
  stats.lastSearchMs = performance.now() - t0;
}

// --- a provider's details ----------------------------------------------------

function select(uuid) {
  state.selected = uuid;
  if (location.hash !== providerHash(uuid)) {
    history.replaceState(null, '', providerHash(uuid));
  }
  renderRows();
  showProvider(uuid);
}

function revealProvider(uuid) {
  // Expand its ancestors so its row is in the tree.
  let cur = store.byUuid.get(uuid);
  while (cur && cur.parent) {
    state.expanded.add(cur.parent);
    cur = store.byUuid.get(cur.parent);
  }
  rebuildRows();
  const i = state.rows.findIndex((r) => r.rp.uuid === uuid);
  if (i >= 0) {
    state.focus = i;
    const tree = $('tree');
    tree.scrollTop = Math.max(0, i * ROW_H - tree.clientHeight / 2);
  }
  state.selected = uuid;
  renderRows();
}

// ``again``: a refresh of the provider on screen (no "Loading…" flash).
// When its consumers cannot be had, what memory holds of the provider
// stays shown (its consumers as last loaded), said to be a failed refresh.
async function showProvider(uuid, again = false) {
  const pane = $('detail');
  const shown = $('provider-detail');
  if (!again && !(shown && shown.dataset.uuid === uuid)) {
    pane.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  }
  try {
    const { consumers } = await api(
      segments('ops', 'ui', 'providers', uuid, 'consumers'));
    const rp = store.byUuid.get(uuid);
    if (state.selected !== uuid || !rp) return;
    state.consumersOf.set(uuid, consumers);
    pane.replaceChildren(providerDetail(rp, consumers));
  } catch (err) {
    if (state.selected !== uuid) return;
    const rp = store.byUuid.get(uuid);
    if (again) markStale(err);
    else if (!rp) fail(pane, err);
    else {
      pane.replaceChildren(providerDetail(rp,
        state.consumersOf.get(uuid) || null, err));
    }
  }
}

function refreshFailed(err) {
  const why = err.status ? `the server answers ${err.message}`
    : 'the server is unreachable';
  return h('p', { class: 'error', role: 'alert', id: 'detail-refresh-failed' },
    `Refresh failed: ${why}. Shown as of ${clock(state.asOf)}.`);
}

// ``consumers`` null: not loaded (``failed``, the error, says why).
function providerDetail(rp, consumers, failed = null) {
  const parent = rp.parent;
  const root = rootOf(rp).uuid;
  const kids = store.children.get(rp.uuid);
  const classes = Object.keys(rp.inv).sort();
  const sums = kids ? rollup(rp.uuid) : null;
  return h('div', {
    id: 'provider-detail', 'data-uuid': rp.uuid,
    'data-generation': rp.generation,
  },
  h('h2', {}, bdi(rp.name)),
  failed ? refreshFailed(failed) : null,
  h('p', { class: 'mono' }, rp.uuid, ` · generation ${rp.generation}`),
  parent ? h('p', {}, 'Parent: ', providerLink(parent)) : null,
  root !== rp.uuid && root !== parent
    ? h('p', {}, 'Root: ', providerLink(root)) : null,
  h('h3', {}, 'Resources'),
  classes.length ? h('div', { id: 'own-resources' }, classes.map(
    (rc) => resourceBar(rc, rp.inv[rc])))
    : h('p', { class: 'muted' }, 'No inventory of its own.'),
  sums ? [h('h3', {}, 'This tree below and including it'),
    h('div', { id: 'tree-resources' }, Object.keys(sums).sort().map(
      (rc) => sumBar(rc, sums[rc])))] : null,
  h('h3', {}, `Traits (${rp.traits.length})`),
  rp.traits.length
    ? h('ul', { class: 'chips', id: 'traits' },
      rp.traits.map((t) => h('li', {}, t)))
    : h('p', { class: 'muted' }, 'None.'),
  h('h3', {}, `Aggregates (${rp.aggs.length})`),
  rp.aggs.length
    ? h('ul', { class: 'chips', id: 'aggregates' },
      rp.aggs.map((a) => h('li', {}, h('a', { href: aggregateHash(a) }, a))))
    : h('p', { class: 'muted' }, 'None.'),
  consumersPart(consumers));
}

function consumersPart(consumers) {
  if (consumers === null) {
    return [h('h3', {}, 'Consumers'), h('p', { class: 'muted' }, 'Not loaded.')];
  }
  if (!consumers.length) {
    return [h('h3', {}, 'Consumers (0)'), h('p', { class: 'muted' }, 'None.')];
  }
  return [h('h3', {}, `Consumers (${consumers.length})`),
    h('table', { id: 'consumers' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Consumer'), h('th', {}, 'Project'),
      h('th', {}, 'User'), h('th', {}, 'Type'),
      h('th', {}, 'Resources here'))),
    h('tbody', {}, consumers.map((c) => h('tr', { 'data-consumer': c.consumer_uuid },
      h('td', { class: 'consumer' }, h('a', {
        href: `#consumer/${enc(c.consumer_uuid)}`, class: 'mono',
      }, c.consumer_uuid)),
      h('td', { class: 'project' }, c.project_id === null ? '' : h('a', {
        href: `#usages/${enc(c.project_id)}`,
      }, bdi(c.project_id))),
      h('td', { class: 'user' }, c.user_id === null ? '' : h('a', {
        href: `#usages/${enc(c.project_id)}/${enc(c.user_id)}`,
      }, bdi(c.user_id))),
      h('td', { class: 'type' }, c.consumer_type || ''),
      h('td', {}, resourcesText(c.resources))))))];
}

const MAX_INT = 2147483647;

function meter(label, used, cap, usedPct, heldPct) {
  const pct = pctOf(used, cap);
  const fill = h('span', { class: `used${pct >= HIGH_PCT ? ' high' : ''}` });
  fill.style.width = `${Math.min(100, usedPct)}%`;
  const held = h('span', { class: 'reserved' });
  held.style.width = `${heldPct}%`;
  return h('span', {
    class: 'bar', role: 'meter', 'aria-label': label,
    'aria-valuemin': 0, 'aria-valuemax': cap, 'aria-valuenow': used,
  }, fill, held);
}

// The bar is the whole inventory (total x ratio): used from the left,
// reserved (hatched) at the right end, free room in between.
function resourceBar(rc, inv) {
  const [total, reserved, ratio, lo, hi, step, used] = inv;
  const cap = capacity(inv);
  const whole = total * ratio;
  const pct = pctOf(used, cap);
  const units = lo !== 1 || hi !== MAX_INT || step !== 1
    ? `, unit ${lo}–${fmt(hi)} step ${step}` : '';
  return h('div', {
    class: 'res', 'data-rc': rc, 'data-used': used, 'data-capacity': cap,
    'data-total': total, 'data-reserved': reserved,
  },
  h('span', { class: 'rc' }, rc),
  meter(`${rc}: ${fmt(used)} used of ${fmt(cap)}`, used, cap,
    whole > 0 ? (100 * used) / whole : 0,
    whole > 0 ? (100 * reserved) / total : 0),
  h('span', { class: 'numbers' },
    `${fmt(used)} used of ${fmt(cap)} (${Math.round(pct)}%; total ` +
    `${fmt(total)}, reserved ${fmt(reserved)}, ratio ${ratio}${units})`));
}

// Sums over several inventories: capacity after ratio, so no hatching.
function sumBar(rc, [cap, used, reserved, total]) {
  const pct = pctOf(used, cap);
  return h('div', {
    class: 'res', 'data-rc': rc, 'data-used': used, 'data-capacity': cap,
  },
  h('span', { class: 'rc' }, rc),
  meter(`${rc}: ${fmt(used)} used of ${fmt(cap)}`, used, cap, pct, 0),
  h('span', { class: 'numbers' },
    `${fmt(used)} used of ${fmt(cap)} (${Math.round(pct)}%; total ` +
    `${fmt(total)}, reserved ${fmt(reserved)})`));
}

// --- cloud-wide totals and aggregates --------------------------------------------

function totalsTable(id, sums) {
  const classes = Object.keys(sums).sort();
  if (!classes.length) return h('p', { class: 'muted' }, 'No inventory.');
  return h('table', { id },
    h('thead', {}, h('tr', {}, h('th', {}, 'Resource class'),
      h('th', { class: 'num' }, 'Providers'), h('th', { class: 'num' }, 'Total'),
      h('th', { class: 'num' }, 'Reserved'),
      h('th', { class: 'num' }, 'Capacity'), h('th', { class: 'num' }, 'Used'),
      h('th', { class: 'num' }, 'Free'), h('th', {}, 'Used %'))),
    h('tbody', {}, classes.map((rc) => {
      const s = sums[rc];
      const pct = pctOf(s.used, s.cap);
      return h('tr', { 'data-rc': rc },
        h('td', {}, rc), h('td', { class: 'num' }, fmt(s.n)),
        h('td', { class: 'num', 'data-k': 'total' }, fmt(s.total)),
        h('td', { class: 'num', 'data-k': 'reserved' }, fmt(s.reserved)),
        h('td', { class: 'num', 'data-k': 'capacity' }, fmt(s.cap)),
        h('td', { class: 'num', 'data-k': 'used' }, fmt(s.used)),
        h('td', { class: 'num', 'data-k': 'free' }, fmt(s.cap - s.used)),
        h('td', { class: 'pct' }, meter(`${rc} ${Math.round(pct)}% used`,
          s.used, s.cap, pct, 0), ` ${Math.round(pct)}%`));
    })));
}

function showTotals() {
  const rps = [...store.byUuid.values()];
  $('totals-result').replaceChildren(h('h2', {}, 'Cloud-wide totals'),
    h('p', { class: 'muted' }, `Over ${rps.length} providers; capacity is ` +
      '(total − reserved) × allocation ratio.'),
    totalsTable('totals-table', sumOver(rps)));
}

// An aggregate counts as member_of does: its members, and the trees of
// the roots among them (trees.aggregateParts).
function showAggregates() {
  const rows = store.aggregates.map((agg) => {
    const { providers, rows: parts } = aggregateParts(agg);
    const sums = sumOver(providers);
    return h('tr', { 'data-aggregate': agg },
      h('td', {}, h('a', { href: aggregateHash(agg), class: 'mono' }, agg)),
      h('td', { class: 'num', 'data-k': 'members' }, parts.length),
      h('td', { class: 'num', 'data-k': 'providers' }, providers.length),
      h('td', {}, Object.keys(sums).sort().map((rc) => h('div', {
        'data-rc': rc,
      }, `${rc}: ${fmt(sums[rc].used)} used of ${fmt(sums[rc].cap)} ` +
        `(${Math.round(pctOf(sums[rc].used, sums[rc].cap))}%)`))));
  });
  $('aggregates-result').replaceChildren(h('h2', {}, 'Aggregates'),
    h('p', { class: 'muted' }, 'An aggregate holds its members and, for a ' +
      'member that is a root, its whole tree (as member_of reads it).'),
    rows.length ? h('table', { id: 'aggregates-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Aggregate'),
        h('th', { class: 'num' }, 'Members'),
        h('th', { class: 'num' }, 'Providers'),
        h('th', {}, 'Used of capacity'))),
      h('tbody', {}, rows))
      : h('p', { class: 'muted' }, 'No provider is in an aggregate.'));
}

function peakText({ rp, pct }) {
  return pct < 0 ? '' : [bdi(rp.name), ` ${Math.round(pct)}%`];
}

// How full the aggregate is, per class, then each member (a root with
// its tree's sums) with its fullest provider; sortable by that.
function showAggregate(agg) {
  const sort = state.aggregateSort;
  const { providers, rows } = aggregateParts(agg);
  let parts = rows;
  if (sort === 'fullest') {
    const score = new Map(rows.map((rp) => [rp, rowPeak(rp).pct]));
    parts = rows.slice().sort((a, b) => score.get(b) - score.get(a));
  }
  // A zone of thousands of hosts: its fullest first, the rest on demand.
  const shown = state.aggregateAll === agg ? parts.length : MEMBERS_SHOWN;
  const more = parts.length - shown;
  parts = parts.slice(0, shown);
  const sorter = h('select', {
    id: 'aggregate-sort', 'aria-label': 'Sort members',
    onchange: (ev) => {
      state.aggregateSort = ev.target.value;
      showAggregate(agg);
    },
  }, h('option', { value: 'name' }, 'by name'),
  h('option', { value: 'fullest' }, 'by fullest provider'));
  sorter.value = sort;
  $('aggregates-result').replaceChildren(h('div', {
    id: 'aggregate-detail', 'data-sort': sort,
  },
  h('h2', {}, 'Aggregate ', h('span', { class: 'mono' }, agg)),
  h('p', {}, h('a', { href: '#aggregates' }, 'All aggregates')),
  h('h3', {}, `How full it is (${providers.length} providers)`),
  h('p', { class: 'muted' }, 'Its members and the trees of the roots ' +
    'among them, each provider once.'),
  totalsTable('aggregate-totals', sumOver(providers)),
  h('h3', {}, `Members (${rows.length}) `, h('label', {}, 'Sort ', sorter)),
  rows.length ? h('table', { id: 'aggregate-members' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Provider'),
      h('th', {}, 'Fullest provider'),
      h('th', {}, 'Used of capacity (Σ: its tree)'))),
    h('tbody', {}, parts.map((rp) => {
      const tree = rootOf(rp) === rp && store.children.has(rp.uuid);
      return h('tr', { 'data-uuid': rp.uuid },
        h('td', {}, providerLink(rp.uuid)),
        h('td', { class: 'peak' }, peakText(rowPeak(rp))),
        h('td', {}, Object.entries(rowSums(rp)).sort().map(([rc, [cap, used]]) =>
          h('div', { 'data-rc': rc },
            `${tree ? 'Σ ' : ''}${rc}: ${fmt(used)} of ${fmt(cap)}`))));
    })))
    : h('p', { class: 'muted' }, 'No members.'),
  more > 0 ? h('p', {}, h('button', {
    type: 'button', id: 'aggregate-all',
    onclick: () => {
      state.aggregateAll = agg;
      showAggregate(agg);
    },
  }, `Show all ${fmt(rows.length)} members (${fmt(more)} more)`)) : null));
}

// --- a consumer -------------------------------------------------------------

async function showConsumer(consumer, again) {
  const out = $('consumer-result');
  $('consumer-id').value = consumer;
  if (!again) out.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  let body;
  try {
    body = await api(segments('allocations', consumer));
  } catch (err) {
    // Not found: an id no consumer can have (the service reads "a/b" as
    // two segments, whatever the encoding) has no allocations either.
    if (err.status !== 404) {
      fail(out, err);
      return;
    }
    body = { allocations: {} };
  }
  const rps = Object.keys(body.allocations);
  if (!rps.length) {
    out.replaceChildren(h('p', { id: 'consumer-none' }, 'Consumer ',
      bdi(consumer), ' has no allocations.'));
    return;
  }
  const project = body.project_id;
  out.replaceChildren(h('div', { id: 'consumer-detail' },
    h('h2', {}, 'Consumer ', h('span', { class: 'mono' }, bdi(consumer))),
    h('table', {},
      h('tbody', {},
        h('tr', {}, h('th', {}, 'Project'), h('td', { id: 'consumer-project' },
          h('a', { href: `#usages/${enc(project)}` }, bdi(project)))),
        h('tr', {}, h('th', {}, 'User'), h('td', { id: 'consumer-user' },
          bdi(body.user_id))),
        h('tr', {}, h('th', {}, 'Consumer type'),
          h('td', { id: 'consumer-type' }, body.consumer_type || '')),
        h('tr', {}, h('th', {}, 'Generation'),
          h('td', {}, body.consumer_generation)))),
    h('h3', {}, 'Allocations'),
    h('table', { id: 'consumer-allocations' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Provider'),
        h('th', {}, 'Resources'))),
      h('tbody', {}, rps.sort().map((rp) => h('tr', { 'data-uuid': rp },
        h('td', {}, providerLink(rp)),
        h('td', {}, resourcesText(body.allocations[rp].resources))))))));
}

// --- usages of a project ------------------------------------------------------

async function showUsages(project, user, again) {
  const out = $('usages-result');
  $('usages-project').value = project;
  $('usages-user').value = user || '';
  if (!again) out.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  let q = `usages?project_id=${enc(project)}`;
  if (user) q += `&user_id=${enc(user)}`;
  try {
    const { usages } = await api(q);
    // From 1.38 grouped by consumer type; before, one flat map.
    const grouped = Object.values(usages).every((v) => typeof v === 'object');
    const groups = grouped ? usages : { all: usages };
    const types = Object.keys(groups).sort();
    const classes = [...new Set(types.flatMap((t) => Object.keys(groups[t])
      .filter((k) => k !== 'consumer_count')))].sort();
    const who = [h('span', { id: 'usages-who' }, bdi(project)),
      user ? [' (user ', bdi(user), ')'] : null];
    if (!types.length) {
      out.replaceChildren(h('p', {}, 'Project ', who, ' uses nothing.'));
      return;
    }
    out.replaceChildren(h('h2', {}, 'Usages of project ', who),
      h('table', { id: 'usages-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Consumer type'),
          h('th', { class: 'num' }, 'Consumers'),
          classes.map((c) => h('th', { class: 'num' }, c)))),
        h('tbody', {}, types.map((t) => h('tr', { 'data-type': t },
          h('td', {}, t),
          h('td', { class: 'num' }, groups[t].consumer_count ?? ''),
          classes.map((c) => h('td', { class: 'num', 'data-rc': c },
            fmt(groups[t][c] || 0))))))));
  } catch (err) {
    fail(out, err);
  }
}

// --- allocation candidates, explained -----------------------------------------

async function runCandidates(query) {
  const out = $('candidates-result');
  $('candidates-query').value = query;
  out.replaceChildren(h('p', { class: 'muted' }, 'Searching…'));
  try {
    const body = await api(`allocation_candidates?${query}`);
    const reqs = body.allocation_requests;
    const explain = h('button', {
      type: 'button', id: 'explain-button',
      onclick: () => runExplain(query),
    }, reqs.length ? 'Why not more?' : 'Why none?');
    // The explanation goes above the candidates, where the button is.
    out.replaceChildren(...[
      h('p', { id: 'candidates-count' }, `${reqs.length} candidates `, explain),
      h('div', { id: 'explain-result' }),
      reqs.length ? h('table', { id: 'candidates-table' },
        h('thead', {}, h('tr', {}, h('th', { class: 'num' }, '#'),
          h('th', {}, 'Allocations'))),
        h('tbody', {}, reqs.map((req, i) => h('tr', {},
          h('td', { class: 'num' }, i + 1),
          h('td', {}, Object.entries(req.allocations).map(([rp, a]) =>
            h('div', {}, providerLink(rp), ` ${resourcesText(a.resources)}`)))))))
        : null].filter(Boolean));
    if (!reqs.length) await runExplain(query, false);
  } catch (err) {
    fail(out, err);
  }
}

async function runExplain(query, focus = true) {
  const out = $('explain-result');
  if (!out) return;
  out.replaceChildren(h('p', { class: 'muted' }, 'Explaining…'));
  try {
    const ex = await api(`ops/explain/allocation_candidates?${query}`);
    const steps = [];
    const stepRows = (name, list) => list.forEach((s, i) => steps.push(
      h('tr', {}, h('td', {}, i === 0 ? name : ''), h('td', {}, s.label),
        h('td', { class: 'num' }, s.in), h('td', { class: 'num' }, s.kept),
        h('td', { class: 'num' }, s.removed))));
    for (const g of ex.groups || []) stepRows(g.name, g.steps || []);
    const comb = ex.combination || { steps: [] };
    stepRows('combined', [...comb.steps, {
      label: 'kept (in a candidate)', in: comb.kept, kept: comb.kept,
      removed: 0,
    }]);
    // Providers that made it are not "excluded".
    const excluded = (ex.explained || []).filter((e) => !e.kept);
    const heading = h('h3', { tabindex: '-1', id: 'explanation-heading' },
      'Explanation');
    out.replaceChildren(h('div', { id: 'explanation' },
      heading,
      h('p', {}, `${ex.candidates} candidates; providers kept: ` +
        `${ex.providers.kept} of ${ex.providers.total}`),
      h('table', { id: 'explain-steps' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Group'), h('th', {}, 'Step'),
          h('th', { class: 'num' }, 'In'), h('th', { class: 'num' }, 'Kept'),
          h('th', { class: 'num' }, 'Removed'))),
        h('tbody', {}, steps)),
      excluded.length ? [h('h3', {}, 'Excluded providers'),
        h('ul', { id: 'explain-reasons' },
          excluded.map((e) => h('li', {}, bdi(e.reason)))),
        ex.not_shown ? h('p', { class: 'muted' }, `${ex.not_shown} more ` +
          'providers not shown.') : null] : null,
      (ex.suggestions || []).length ? [h('h3', {}, 'What would change that'),
        h('ul', { id: 'explain-suggestions' },
          ex.suggestions.map((s) => h('li', {}, s)))] : null));
    if (focus) {
      heading.focus({ preventScroll: true });
      heading.scrollIntoView({ block: 'start' });
    }
  } catch (err) {
    fail(out, err);
  }
}

// --- capacity -------------------------------------------------------------------

// As placement-manage capacity prints it: "up to N" for trees competing
// for a sharing provider, "at least N" where the count is not proven.
function fitsText(t) {
  if (!t.exact) return `at least ${t.fits}${t.shared ? ', shared' : ''}`;
  return t.shared ? `up to ${t.fits}` : `${t.fits}`;
}

async function runCapacity(query) {
  const out = $('capacity-result');
  $('capacity-query').value = query;
  out.replaceChildren(h('p', { class: 'muted' }, 'Counting…'));
  try {
    const c = await api(`ops/capacity?${query}`);
    const aggs = Object.entries(c.aggregates || {}).sort();
    out.replaceChildren(h('div', { id: 'capacity-report' },
      h('p', { id: 'capacity-total' }, `Total: ${c.total} more fit ` +
        `(${c.exact ? 'exact' : 'lower bound'})`),
      h('h3', {}, 'Per aggregate'),
      aggs.length ? h('table', { id: 'capacity-aggregates' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Aggregate'),
          h('th', { class: 'num' }, 'Fits'))),
        h('tbody', {}, aggs.map(([agg, n]) => h('tr', { 'data-aggregate': agg },
          h('td', { class: 'mono' }, h('a', { href: aggregateHash(agg) }, agg)),
          h('td', { class: 'num' }, n)))))
        : h('p', { class: 'muted' }, 'No aggregates.'),
      h('h3', {}, 'Per tree'),
      h('table', { id: 'capacity-trees' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Root provider'),
          h('th', { class: 'num' }, 'Fits'))),
        h('tbody', {}, c.trees.map((t) => h('tr', {},
          h('td', {}, providerLink(t.root_provider_uuid)),
          h('td', { class: 'num' }, fitsText(t))))))));
  } catch (err) {
    fail(out, err);
  }
}

// --- views and wiring -------------------------------------------------------------

function showView(name) {
  state.view = name;
  for (const v of document.querySelectorAll('.view')) {
    v.hidden = v.id !== `view-${name}`;
  }
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

// The hash is "#view/part/part?query": each part percent-encoded on its
// own (a project id may hold "/", a consumer box "%").
function parseHash() {
  const raw = location.hash.slice(1);
  const q = raw.indexOf('?');
  const path = q >= 0 ? raw.slice(0, q) : raw;
  const query = q >= 0 ? raw.slice(q + 1) : '';
  const [head, ...rest] = path.split('/').map(dec);
  return { head, rest, query };
}

// ``again``: the data changed under an open view; redraw it quietly.
function route(again = false) {
  if (!state.connected) return;
  const { head, rest, query } = parseHash();
  const arg = rest[0];
  if (head === 'provider' && arg) {
    showView('providers');
    if (store.byUuid.has(arg)) {
      revealProvider(arg);
      showProvider(arg);
    }
  } else if (head === 'totals') {
    showView('totals');
    showTotals();
  } else if (head === 'aggregates') {
    showView('aggregates');
    showAggregates();
  } else if (head === 'aggregate' && arg) {
    showView('aggregates');
    showAggregate(arg);
  } else if (head === 'consumer') {
    showView('consumer');
    if (arg) showConsumer(arg, again);
    else $('consumer-result').replaceChildren();
  } else if (head === 'usages') {
    showView('usages');
    if (arg) showUsages(arg, rest[1], again);
  } else if (head === 'candidates') {
    showView('candidates');
    if (query && !again) runCandidates(query);
  } else if (head === 'capacity') {
    showView('capacity');
    if (query && !again) runCapacity(query);
  } else {
    showView('providers');
  }
}

// Forget everything the last token saw: nothing of it stays on screen.
function clearData() {
  endSession();
  state.connected = false;
  clearTimeout(state.pollTimer);
  state.dataToken = null;
  state.asOf = null;
  state.lastError = null;
  trees.clear();
  state.rows = [];
  state.selected = null;
  state.consumersOf = new Map();
  state.expanded = new Set();
  rowCache = new Map();
  $('tree-spacer').replaceChildren();
  $('tree-spacer').style.height = '0px';
  $('tree-count').textContent = '';
  $('freshness').textContent = '';
  $('freshness').classList.remove('error');
  document.body.classList.remove('stale');
  $('detail').replaceChildren(h('p', { class: 'muted' },
    'Connect with a token, then pick a provider.'));
  for (const id of ['totals-result', 'aggregates-result', 'consumer-result',
    'usages-result', 'candidates-result', 'capacity-result']) {
    $(id).replaceChildren();
  }
  for (const id of ['filter-rc', 'filter-trait', 'filter-agg']) {
    fillSelect(id, []);
  }
  $('search').value = '';
  $('filter-pct').value = '';
  state.filter = { text: '', rc: '', trait: '', agg: '', pct: null };
  $('disconnect').hidden = true;
}

// The boxes and the address name what the last session looked at: a
// consumer, a project, a user, a query. Disconnect leaves none of them.
function clearQueries() {
  for (const id of ['consumer-id', 'usages-project', 'usages-user']) {
    $(id).value = '';
  }
  for (const id of ['candidates-query', 'capacity-query']) {
    $(id).value = $(id).defaultValue;
  }
  if (location.hash) {
    history.replaceState(null, '', location.pathname + location.search);
  }
  showView('providers');
}

function disconnect(message, error = false) {
  clearData();
  clearQueries();
  session.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  $('token').value = '';
  setStatus(message, error);
}

async function connect() {
  clearData();
  try {
    await loadProviders();
    $('disconnect').hidden = false;
    $('detail').replaceChildren(h('p', { class: 'muted' }, 'Pick a provider.'));
    route();
    schedulePoll(nextPollMs());
  } catch (err) {
    clearData();
    setStatus(refused(err)
      ? `Token refused (${err.message})` : `Cannot list providers: ${err.message}`,
    true);
  }
}

// Submitting the same query again re-runs it (no hashchange then).
function go(hash) {
  if (location.hash === `#${hash}`) route();
  else location.hash = hash;
}

async function loadSettings() {
  try {
    const resp = await fetch(new URL('settings.json', location.href));
    if (resp.ok) state.noauth2 = Boolean((await resp.json()).noauth2);
  } catch (e) {
    state.noauth2 = false;
  }
  $('token-hint').textContent = state.noauth2
    ? 'noauth2: the token names a user; admin is an admin' : '';
}

async function init() {
  $('token').value = session.token;
  $('login').addEventListener('submit', (ev) => {
    ev.preventDefault();
    session.token = $('token').value.trim();
    sessionStorage.setItem(TOKEN_KEY, session.token);
    connect();
  });
  $('disconnect').addEventListener('click', () => {
    disconnect('Disconnected.');
    $('token').focus();
  });
  for (const id of ['search', 'filter-pct']) {
    $(id).addEventListener('input', onFilter);
  }
  for (const id of ['filter-rc', 'filter-trait', 'filter-agg', 'sort']) {
    $(id).addEventListener('change', onFilter);
  }
  const tree = $('tree');
  tree.addEventListener('scroll', () => renderRows(), { passive: true });
  tree.addEventListener('keydown', onTreeKey);
  tree.addEventListener('click', onTreeClick);
  $('consumer-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    go(`consumer/${enc($('consumer-id').value.trim())}`);
  });
  $('usages-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const user = $('usages-user').value.trim();
    go(`usages/${enc($('usages-project').value.trim())}` +
      (user ? `/${enc(user)}` : ''));
  });
  $('candidates-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    go(`candidates?${$('candidates-query').value.trim()}`);
  });
  $('capacity-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    go(`capacity?${$('capacity-query').value.trim()}`);
  });
  window.addEventListener('hashchange', () => route());
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && state.connected && !state.lastError) {
      schedulePoll(0);
    }
  });
  await loadSettings();
  if (session.token) connect();
  else setStatus('Enter a token.');
}

init();
