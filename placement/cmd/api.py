"""placement-api: a development server for the Placement WSGI app.

For production run ``placement.wsgi.api:application`` under gunicorn,
uwsgi or mod_wsgi; this serves on a single process with wsgiref.
"""
import argparse
import sys
from wsgiref import simple_server

from placement.wsgi import api


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write('%s - %s\n' % (self.address_string(), fmt % args))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=8000)
    args = parser.parse_args(argv)
    app = api.init_application()
    server = simple_server.make_server(
        args.host, args.port, app,
        server_class=simple_server.WSGIServer, handler_class=_QuietHandler)
    print('placement-api serving on http://%s:%d/' % (args.host, args.port),
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
