// The web view: plain DOM, no framework. Every number comes from the JSON
// API, called with the visitor's token; this file holds no data.
//
// Scale: the provider list is fetched once; the tree is virtualised (only
// the rows in view exist in the DOM), and inventories/usages are fetched
// for the rows in view only, a few at a time, and kept.

const API = new URL('..', location.href);   // the service root (/ui/..)
const ROW_H = 32;
const OVERSCAN = 6;
const FETCH_PARALLEL = 6;
const TOKEN_KEY = 'placement-ui-token';

const $ = (id) => document.getElementById(id);

export const stats = {};
window.placementUI = { stats };

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  providers: [],          // as GET /resource_providers lists them
  byUuid: new Map(),
  children: new Map(),    // uuid -> [child provider, ...] sorted by name
  roots: [],
  expanded: new Set(),
  filter: '',
  rows: [],               // [{rp, depth}] in display order
  focus: 0,               // index into rows of the focusable row
  selected: null,
  usage: new Map(),       // uuid -> {inventories, usages} once fetched
  pending: new Set(),
};

// --- the API ------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.errors && body.errors[0]
      ? body.errors[0].detail : '';
    super(`${status}${detail ? ': ' + detail : ''}`);
    this.status = status;
  }
}

async function api(path) {
  const resp = await fetch(new URL(path, API), {
    headers: {
      'x-auth-token': state.token,
      'accept': 'application/json',
      'openstack-api-version': 'placement latest',
    },
  });
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) throw new ApiError(resp.status, body);
  return body;
}

const enc = encodeURIComponent;

// --- DOM helpers ----------------------------------------------------------

// Text only (never innerHTML): names and ids are whatever clients wrote.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function setStatus(text, error = false) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('error', error);
}

function fail(target, err) {
  target.replaceChildren(h('p', { class: 'error', role: 'alert' },
    `Request failed: ${err.message}`));
}

const fmt = (n) => (Number.isInteger(n) ? n : Number(n.toFixed(2)))
  .toLocaleString('en-US');

function providerName(uuid) {
  const rp = state.byUuid.get(uuid);
  return rp ? rp.name : uuid;
}

function providerLink(uuid) {
  return h('a', { href: `#provider/${uuid}` }, providerName(uuid));
}

function resourcesText(resources) {
  return Object.entries(resources).sort()
    .map(([rc, n]) => `${rc}: ${fmt(n)}`).join(', ');
}

// --- the provider tree ----------------------------------------------------

async function loadProviders() {
  setStatus('Loading providers…');
  const t0 = performance.now();
  const body = await api('resource_providers');
  stats.listMs = performance.now() - t0;
  const providers = body.resource_providers;
  providers.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  state.providers = providers;
  state.byUuid = new Map();
  state.children = new Map();
  state.roots = [];
  state.usage.clear();
  for (const rp of providers) {
    rp._key = rp.name.toLowerCase();
    state.byUuid.set(rp.uuid, rp);
  }
  for (const rp of providers) {
    const parent = rp.parent_provider_uuid;
    if (parent && state.byUuid.has(parent)) {
      if (!state.children.has(parent)) state.children.set(parent, []);
      state.children.get(parent).push(rp);
    } else {
      state.roots.push(rp);
    }
  }
  const roots = state.roots.length;
  setStatus(`${providers.length} providers in ${roots} trees`);
  rebuildRows();
  requestAnimationFrame(() => {
    performance.mark('ui-tree-painted');
    stats.treePaintedMs = performance.now();
  });
}

function rebuildRows() {
  const rows = [];
  const f = state.filter;
  if (!f) {
    const walk = (rp, depth) => {
      rows.push({ rp, depth });
      if (state.expanded.has(rp.uuid)) {
        for (const c of state.children.get(rp.uuid) || []) walk(c, depth + 1);
      }
    };
    for (const r of state.roots) walk(r, 0);
    $('tree-count').textContent =
      `${state.providers.length} providers, ${state.roots.length} trees`;
  } else {
    // Matches with their ancestors, so each match is seen in its tree.
    const keep = new Set();
    let matches = 0;
    for (const rp of state.providers) {
      if (rp._key.includes(f) || rp.uuid.startsWith(f)) {
        matches += 1;
        let cur = rp;
        while (cur && !keep.has(cur.uuid)) {
          keep.add(cur.uuid);
          cur = state.byUuid.get(cur.parent_provider_uuid);
        }
      }
    }
    const walk = (rp, depth) => {
      rows.push({ rp, depth });
      for (const c of state.children.get(rp.uuid) || []) {
        if (keep.has(c.uuid)) walk(c, depth + 1);
      }
    };
    for (const r of state.roots) if (keep.has(r.uuid)) walk(r, 0);
    $('tree-count').textContent = `${matches} of ${state.providers.length} ` +
      'providers match';
  }
  state.rows = rows;
  state.focus = Math.min(state.focus, Math.max(rows.length - 1, 0));
  $('tree-spacer').style.height = `${rows.length * ROW_H}px`;
  renderRows();
}

function expandedIn(rp) {
  return state.filter ? true : state.expanded.has(rp.uuid);
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
    const { rp, depth } = state.rows[i];
    const kids = state.children.get(rp.uuid);
    const open = expandedIn(rp);
    const sig = `${i}|${depth}|${open}|${state.usage.has(rp.uuid)}`;
    let row = rowCache.get(rp.uuid);
    if (!row || row.dataset.sig !== sig) {
      row = h('div', {
        class: 'row', role: 'treeitem', id: `rp-${rp.uuid}`,
        'data-uuid': rp.uuid, 'data-index': i, 'data-sig': sig,
        'aria-level': depth + 1,
        'aria-expanded': kids ? String(open) : null,
      },
      h('span', { class: 'toggle', 'aria-hidden': 'true' },
        kids ? (open ? '▾' : '▸') : ''),
      h('span', { class: 'name' }, rp.name),
      h('span', { class: 'uuid' }, rp.uuid.slice(0, 8)),
      miniBars(rp.uuid));
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
  scheduleUsage(first, last);
}

function miniBars(uuid) {
  const data = state.usage.get(uuid);
  if (!data) return h('span', { class: 'minis' });
  const bars = Object.entries(data.inventories).sort().map(([rc, inv]) => {
    const cap = capacity(inv);
    const used = data.usages[rc] || 0;
    const fill = h('span');
    fill.style.width = `${cap > 0 ? Math.min(100, (100 * used) / cap) : 0}%`;
    return h('span', { class: 'mini-wrap', title: `${rc} ${fmt(used)} of ${fmt(cap)}` },
      h('span', { class: 'mini-rc' }, shortClass(rc)),
      h('span', { class: 'mini' }, fill));
  });
  return h('span', { class: 'minis', 'aria-hidden': 'true' }, bars);
}

const SHORT = { MEMORY_MB: 'MEM', DISK_GB: 'DISK', SRIOV_NET_VF: 'VF' };
function shortClass(rc) {
  const name = SHORT[rc] || rc.replace(/^CUSTOM_/, '');
  return name.length > 8 ? `${name.slice(0, 7)}…` : name;
}

function capacity(inv) {
  return (inv.total - inv.reserved) * inv.allocation_ratio;
}

// Inventories and usages of the rows in view only, a few at a time.
let usageTimer = null;
function scheduleUsage(first, last) {
  clearTimeout(usageTimer);
  usageTimer = setTimeout(() => {
    const want = [];
    for (let i = first; i < last; i += 1) {
      const { uuid } = state.rows[i].rp;
      if (!state.usage.has(uuid) && !state.pending.has(uuid)) want.push(uuid);
    }
    let next = 0;
    const worker = async () => {
      while (next < want.length) {
        const uuid = want[next];
        next += 1;
        try {
          await usageOf(uuid);
        } catch (e) {
          return;   // the status line already says why
        }
      }
      renderRows();
    };
    for (let k = 0; k < FETCH_PARALLEL; k += 1) worker();
  }, 50);
}

async function usageOf(uuid) {
  if (state.usage.has(uuid)) return state.usage.get(uuid);
  state.pending.add(uuid);
  try {
    const [inv, use] = await Promise.all([
      api(`resource_providers/${uuid}/inventories`),
      api(`resource_providers/${uuid}/usages`),
    ]);
    const data = { inventories: inv.inventories, usages: use.usages };
    stats.usageFetched = (stats.usageFetched || 0) + 1;
    state.usage.set(uuid, data);
    return data;
  } finally {
    state.pending.delete(uuid);
  }
}

function toggle(uuid) {
  if (state.filter || !state.children.has(uuid)) return;
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
  const kids = state.children.get(rp.uuid);
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
      if (kids && expandedIn(rp) && !state.filter) {
        toggle(rp.uuid); moveFocus(state.focus);
      } else if (rp.parent_provider_uuid) {
        const p = state.rows.findIndex((r) => r.rp.uuid === rp.parent_provider_uuid);
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

function onTreeClick(ev) {
  const row = ev.target.closest('.row');
  if (!row) return;
  const i = Number(row.dataset.index);
  state.focus = i;
  if (ev.target.classList.contains('toggle')) toggle(row.dataset.uuid);
  select(row.dataset.uuid);
  moveFocus(i);
}

function onSearch() {
  const t0 = performance.now();
  state.filter = $('search').value.trim().toLowerCase();
  state.focus = 0;
  $('tree').scrollTop = 0;
  rebuildRows();
  stats.lastSearchMs = performance.now() - t0;
}

// --- a provider's details ----------------------------------------------------

function select(uuid) {
  state.selected = uuid;
  if (location.hash !== `#provider/${uuid}`) {
    history.replaceState(null, '', `#provider/${uuid}`);
  }
  renderRows();
  showProvider(uuid);
}

function revealProvider(uuid) {
  // Expand its ancestors so its row is in the tree.
  let cur = state.byUuid.get(uuid);
  while (cur && cur.parent_provider_uuid) {
    state.expanded.add(cur.parent_provider_uuid);
    cur = state.byUuid.get(cur.parent_provider_uuid);
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

async function showProvider(uuid) {
  const pane = $('detail');
  const rp = state.byUuid.get(uuid);
  pane.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  try {
    const [usage, traits, aggs, allocs] = await Promise.all([
      usageOf(uuid),
      api(`resource_providers/${uuid}/traits`),
      api(`resource_providers/${uuid}/aggregates`),
      api(`resource_providers/${uuid}/allocations`),
    ]);
    if (state.selected !== uuid) return;
    pane.replaceChildren(providerDetail(rp, usage, traits.traits,
      aggs.aggregates, allocs.allocations));
  } catch (err) {
    fail(pane, err);
  }
}

function providerDetail(rp, usage, traits, aggregates, allocations) {
  const parent = rp.parent_provider_uuid;
  const classes = Object.keys(usage.inventories).sort();
  const consumers = Object.keys(allocations).sort();
  return h('div', { id: 'provider-detail', 'data-uuid': rp.uuid },
    h('h2', {}, rp.name),
    h('p', { class: 'mono' }, rp.uuid, ` · generation ${rp.generation}`),
    parent ? h('p', {}, 'Parent: ', providerLink(parent)) : null,
    rp.root_provider_uuid !== rp.uuid && rp.root_provider_uuid !== parent
      ? h('p', {}, 'Root: ', providerLink(rp.root_provider_uuid)) : null,
    h('h3', {}, 'Resources'),
    classes.length ? classes.map((rc) => resourceBar(rc,
      usage.inventories[rc], usage.usages[rc] || 0))
      : h('p', { class: 'muted' }, 'No inventory.'),
    h('h3', {}, `Traits (${traits.length})`),
    traits.length
      ? h('ul', { class: 'chips', id: 'traits' },
        traits.slice().sort().map((t) => h('li', {}, t)))
      : h('p', { class: 'muted' }, 'None.'),
    h('h3', {}, `Aggregates (${aggregates.length})`),
    aggregates.length
      ? h('ul', { class: 'chips', id: 'aggregates' },
        aggregates.slice().sort().map((a) => h('li', {}, a)))
      : h('p', { class: 'muted' }, 'None.'),
    h('h3', {}, `Consumers (${consumers.length})`),
    consumers.length ? h('table', { id: 'consumers' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Consumer'),
        h('th', {}, 'Resources here'))),
      h('tbody', {}, consumers.map((c) => h('tr', {},
        h('td', {}, h('a', { href: `#consumer/${c}`, class: 'mono' }, c)),
        h('td', {}, resourcesText(allocations[c].resources))))))
      : h('p', { class: 'muted' }, 'None.'));
}

const MAX_INT = 2147483647;

// The bar is the whole inventory (total x ratio): used from the left,
// reserved (hatched) at the right end, free room in between.
function resourceBar(rc, inv, used) {
  const cap = capacity(inv);
  const whole = inv.total * inv.allocation_ratio;
  const pct = cap > 0 ? Math.min(100, (100 * used) / cap) : 0;
  const fill = h('span', { class: `used${pct >= 90 ? ' high' : ''}` });
  fill.style.width = `${whole > 0 ? Math.min(100, (100 * used) / whole) : 0}%`;
  const held = h('span', { class: 'reserved' });
  held.style.width = `${whole > 0 ? (100 * inv.reserved * inv.allocation_ratio) / whole : 0}%`;
  const label = `${rc}: ${fmt(used)} used of ${fmt(cap)}`;
  const units = inv.min_unit !== 1 || inv.max_unit !== MAX_INT
    || inv.step_size !== 1
    ? `, unit ${inv.min_unit}–${fmt(inv.max_unit)} step ${inv.step_size}` : '';
  return h('div', {
    class: 'res', 'data-rc': rc, 'data-used': used, 'data-capacity': cap,
    'data-total': inv.total, 'data-reserved': inv.reserved,
  },
  h('span', { class: 'rc' }, rc),
  h('span', {
    class: 'bar', role: 'meter', 'aria-label': label,
    'aria-valuemin': 0, 'aria-valuemax': cap, 'aria-valuenow': used,
  }, fill, held),
  h('span', { class: 'numbers' },
    `${fmt(used)} used of ${fmt(cap)} (${Math.round(pct)}%; total ` +
    `${fmt(inv.total)}, reserved ${fmt(inv.reserved)}, ratio ` +
    `${inv.allocation_ratio}${units})`));
}

// --- a consumer -------------------------------------------------------------

async function showConsumer(consumer) {
  const out = $('consumer-result');
  $('consumer-id').value = consumer;
  out.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  try {
    const body = await api(`allocations/${enc(consumer)}`);
    const rps = Object.keys(body.allocations);
    if (!rps.length) {
      out.replaceChildren(h('p', {}, `Consumer ${consumer} has no allocations.`));
      return;
    }
    const project = body.project_id;
    out.replaceChildren(h('div', { id: 'consumer-detail' },
      h('h2', {}, 'Consumer ', h('span', { class: 'mono' }, consumer)),
      h('table', {},
        h('tbody', {},
          h('tr', {}, h('th', {}, 'Project'), h('td', { id: 'consumer-project' },
            h('a', { href: `#usages/${enc(project)}` }, project))),
          h('tr', {}, h('th', {}, 'User'), h('td', { id: 'consumer-user' },
            body.user_id)),
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
  } catch (err) {
    fail(out, err);
  }
}

// --- usages of a project ------------------------------------------------------

async function showUsages(project, user) {
  const out = $('usages-result');
  $('usages-project').value = project;
  $('usages-user').value = user || '';
  out.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
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
    if (!types.length) {
      out.replaceChildren(h('p', {}, `Project ${project} uses nothing.`));
      return;
    }
    out.replaceChildren(h('table', { id: 'usages-table' },
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
  const why = $('explain-result');
  $('candidates-query').value = query;
  why.replaceChildren();
  out.replaceChildren(h('p', { class: 'muted' }, 'Searching…'));
  try {
    const body = await api(`allocation_candidates?${query}`);
    const reqs = body.allocation_requests;
    const explain = h('button', {
      type: 'button', id: 'explain-button',
      onclick: () => runExplain(query),
    }, reqs.length ? 'Why not more?' : 'Why none?');
    out.replaceChildren(...[
      h('p', { id: 'candidates-count' }, `${reqs.length} candidates `, explain),
      reqs.length ? h('table', { id: 'candidates-table' },
        h('thead', {}, h('tr', {}, h('th', { class: 'num' }, '#'),
          h('th', {}, 'Allocations'))),
        h('tbody', {}, reqs.map((req, i) => h('tr', {},
          h('td', { class: 'num' }, i + 1),
          h('td', {}, Object.entries(req.allocations).map(([rp, a]) =>
            h('div', {}, providerLink(rp), ` ${resourcesText(a.resources)}`)))))))
        : null].filter(Boolean));
    if (!reqs.length) await runExplain(query);
  } catch (err) {
    fail(out, err);
  }
}

async function runExplain(query) {
  const out = $('explain-result');
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
    out.replaceChildren(h('div', { id: 'explanation' },
      h('h3', {}, 'Explanation'),
      h('p', {}, `${ex.candidates} candidates; providers kept: ` +
        `${ex.providers.kept} of ${ex.providers.total}`),
      h('table', { id: 'explain-steps' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Group'), h('th', {}, 'Step'),
          h('th', { class: 'num' }, 'In'), h('th', { class: 'num' }, 'Kept'),
          h('th', { class: 'num' }, 'Removed'))),
        h('tbody', {}, steps)),
      (ex.explained || []).length ? [h('h3', {}, 'Excluded providers'),
        h('ul', { id: 'explain-reasons' },
          ex.explained.map((e) => h('li', {}, e.reason))),
        ex.not_shown ? h('p', { class: 'muted' }, `${ex.not_shown} more ` +
          'providers not shown.') : null] : null,
      (ex.suggestions || []).length ? [h('h3', {}, 'What would change that'),
        h('ul', { id: 'explain-suggestions' },
          ex.suggestions.map((s) => h('li', {}, s)))] : null));
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
          h('td', { class: 'mono' }, agg), h('td', { class: 'num' }, n)))))
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
  for (const v of document.querySelectorAll('.view')) {
    v.hidden = v.id !== `view-${name}`;
  }
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function route() {
  const hash = decodeURIComponent(location.hash.slice(1));
  const [head, ...rest] = hash.split('/');
  const arg = rest.join('/');
  if (!state.token) return;
  if (head === 'provider' && arg) {
    showView('providers');
    if (state.byUuid.has(arg)) {
      revealProvider(arg);
      showProvider(arg);
    }
  } else if (head === 'consumer') {
    showView('consumer');
    if (arg) showConsumer(arg);
  } else if (head === 'usages') {
    showView('usages');
    if (arg) showUsages(...arg.split('/'));
  } else if (head.startsWith('candidates')) {
    showView('candidates');
    const q = location.hash.split('?').slice(1).join('?');
    if (q) runCandidates(q);
  } else if (head.startsWith('capacity')) {
    showView('capacity');
    const q = location.hash.split('?').slice(1).join('?');
    if (q) runCapacity(q);
  } else {
    showView('providers');
  }
}

async function connect() {
  try {
    await loadProviders();
    route();
  } catch (err) {
    setStatus(err.status === 401 || err.status === 403
      ? `Token refused (${err.message})` : `Cannot list providers: ${err.message}`,
    true);
  }
}

// Submitting the same query again re-runs it (no hashchange then).
function go(hash) {
  if (location.hash === `#${hash}`) route();
  else location.hash = hash;
}

function init() {
  $('token').value = state.token;
  $('login').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.token = $('token').value.trim();
    sessionStorage.setItem(TOKEN_KEY, state.token);
    connect();
  });
  $('search').addEventListener('input', onSearch);
  const tree = $('tree');
  tree.addEventListener('scroll', () => renderRows(), { passive: true });
  tree.addEventListener('keydown', onTreeKey);
  tree.addEventListener('click', onTreeClick);
  $('consumer-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    go(`consumer/${$('consumer-id').value.trim()}`);
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
  window.addEventListener('hashchange', route);
  if (state.token) connect();
  else setStatus('Enter a token (with noauth2: admin).');
}

init();
