"""GET /: the version document, answered without authentication."""
from placement import microversion
from placement import util


@util.wsgify
@util.check_accept('application/json')
def home(req):
    min_version = microversion.min_version_string()
    max_version = microversion.max_version_string()
    version_data = {
        'id': 'v%s' % min_version,
        'max_version': max_version,
        'min_version': min_version,
        'status': 'CURRENT',
        'links': [{'rel': 'self', 'href': ''}],
    }
    return util.json_response(req, {'versions': [version_data]})
