// The page's one way to the API, and the session its answers belong to.
//
// A session is one connected token: it ends at Disconnect, and when a
// token connects (the same or another). Every request goes through api(),
// which notes the session it was asked in; an answer that comes back after
// that session ended is dropped here, whatever view asked for it, so
// nothing an earlier token saw is drawn under a later one (issue 49).

const API = new URL('..', location.href);   // the service root (/ui/..)

export const session = {
  id: 0,       // bumped by endSession()
  token: '',
};

// Answers to every request made so far are dropped from now on.
export function endSession() {
  session.id += 1;
}

export class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.errors && body.errors[0]
      ? body.errors[0].detail : '';
    super(`${status}${detail ? ': ' + detail : ''}`);
    this.status = status;
  }
}

// Awaited in place of an answer of an ended session: it never settles, so
// the code after the caller's await (which would draw) never runs.
const DROPPED = new Promise(() => {});

export async function api(path) {
  const asked = session.id;
  let resp;
  let body = null;
  try {
    resp = await fetch(new URL(path, API), {
      headers: {
        'x-auth-token': session.token,
        'accept': 'application/json',
        'openstack-api-version': 'placement latest',
      },
    });
    try { body = await resp.json(); } catch (e) { body = null; }
  } catch (err) {
    if (asked !== session.id) return DROPPED;
    throw err;
  }
  if (asked !== session.id) return DROPPED;
  if (!resp.ok) throw new ApiError(resp.status, body);
  return body;
}

export const enc = encodeURIComponent;

export function dec(s) {
  try { return decodeURIComponent(s); } catch (e) { return s; }
}

// A path of segments, each percent-encoded on its own: an id holding "/",
// "#", "?" or "%" stays one segment ("#aggregate/" + an id, an API path).
export const segments = (...parts) => parts.map(enc).join('/');

export const refused = (err) => err.status === 401 || err.status === 403;
