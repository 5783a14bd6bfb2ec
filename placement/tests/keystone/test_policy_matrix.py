"""Who may do what, with real Keystone tokens: persona x request, under
the legacy defaults and the secure-RBAC ones.

The expected table is data. Its allowed/denied pattern follows from the
check strings in placement/policies:

* almost every rule is ``role:admin or role:service`` (admin_or_service);
* ``placement:reshaper:reshape`` is ``role:service`` alone;
* ``placement:usages`` (``GET /usages``) adds ``role:reader and
  project_id:%(project_id)s``, the project asked about;
* all of them are ``scope_types=['project']`` with the deprecated
  ``role:admin`` as their old default.

Legacy (``enforce_new_defaults = False``): each rule is ORed with
``role:admin``, so project admin passes even the reshaper. Secure RBAC
(``enforce_new_defaults = True``): project admin passes all but the
reshaper. In both, readers and members see only their own project's
usages, and system-scoped tokens are refused (403) by scope: oslo.policy 6
dropped ``enforce_scope`` and always checks scope_types, so
``enforce_scope = False``, written in the legacy config below as an older
deployment would have it, changes nothing.

Allowed answers are each request's own (200, 201, 204, or the 400/404 its
body or target earns after the policy check); a denial is 403. Columns:
project-admin, project-member, project-reader, other-member (member of
project alt), system-admin, system-reader, nova (service role in the
service project).
"""
import uuid

import pytest

from placement.tests.keystone import conftest as kc

PERSONAS = ['project-admin', 'project-member', 'project-reader',
            'other-member', 'system-admin', 'system-reader', 'nova']

MISSING = '00000000-0000-4000-8000-00000000dead'

# (method, path, body, legacy row, secure-RBAC row)
MATRIX = [
    ('GET', '/', None,
     '200 200 200 200 200 200 200', '200 200 200 200 200 200 200'),
    # resource providers
    ('GET', '/resource_providers', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('POST', '/resource_providers', 'new_rp',
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('GET', '/resource_providers/{rp}', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('PUT', '/resource_providers/{rp}', 'same_name',
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('DELETE', '/resource_providers/{missing}', None,
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    # inventories
    ('GET', '/resource_providers/{rp}/inventories', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('POST', '/resource_providers/{missing}/inventories', 'inventory',
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    ('GET', '/resource_providers/{rp}/inventories/VCPU', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('PUT', '/resource_providers/{missing}/inventories', 'inventories',
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    ('PUT', '/resource_providers/{missing}/inventories/VCPU', 'inventory',
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    ('DELETE', '/resource_providers/{missing}/inventories/VCPU', None,
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    ('DELETE', '/resource_providers/{missing}/inventories', None,
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    # aggregates and provider traits
    ('GET', '/resource_providers/{rp}/aggregates', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('PUT', '/resource_providers/{missing}/aggregates', 'aggregates',
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    ('GET', '/resource_providers/{rp}/traits', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('PUT', '/resource_providers/{missing}/traits', 'traits',
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    ('DELETE', '/resource_providers/{missing}/traits', None,
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    # allocations and usages
    ('GET', '/resource_providers/{rp}/allocations', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('GET', '/resource_providers/{rp}/usages', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('GET', '/usages?project_id={demo}', None,
     '200 200 200 403 403 403 200', '200 200 200 403 403 403 200'),
    ('GET', '/usages?project_id={alt}', None,
     '200 403 403 200 403 403 200', '200 403 403 200 403 403 200'),
    ('GET', '/allocations/{new_uuid}', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('PUT', '/allocations/{new_uuid}', 'empty',
     '400 403 403 403 403 403 400', '400 403 403 403 403 403 400'),
    ('DELETE', '/allocations/{missing}', None,
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    ('POST', '/allocations', 'empty',
     '400 403 403 403 403 403 400', '400 403 403 403 403 403 400'),
    ('GET', '/allocation_candidates?resources=VCPU:1', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    # service role only under secure RBAC
    ('POST', '/reshaper', 'empty',
     '400 403 403 403 403 403 400', '403 403 403 403 403 403 400'),
    # resource classes
    ('GET', '/resource_classes', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('POST', '/resource_classes', 'new_rc',
     '201 403 403 403 403 403 201', '201 403 403 403 403 403 201'),
    ('GET', '/resource_classes/VCPU', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('PUT', '/resource_classes/{new_rc}', None,
     '201 403 403 403 403 403 201', '201 403 403 403 403 403 201'),
    ('DELETE', '/resource_classes/CUSTOM_MISSING', None,
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
    # traits
    ('GET', '/traits', None,
     '200 403 403 403 403 403 200', '200 403 403 403 403 403 200'),
    ('GET', '/traits/HW_CPU_X86_AVX2', None,
     '204 403 403 403 403 403 204', '204 403 403 403 403 403 204'),
    ('PUT', '/traits/{new_trait}', None,
     '201 403 403 403 403 403 201', '201 403 403 403 403 403 201'),
    ('DELETE', '/traits/CUSTOM_MISSING', None,
     '404 403 403 403 403 403 404', '404 403 403 403 403 403 404'),
]

MODES = {'legacy': kc.LEGACY, 'secure-rbac': kc.SECURE_RBAC}


def _custom():
    return 'CUSTOM_' + uuid.uuid4().hex.upper()


def _body(kind):
    return {
        None: lambda: None,
        'empty': lambda: {},
        'new_rp': lambda: {'name': 'rp-' + uuid.uuid4().hex},
        'same_name': lambda: {'name': 'matrix-rp'},
        'new_rc': lambda: {'name': _custom()},
        'inventory': lambda: {'resource_class': 'VCPU', 'total': 8,
                              'resource_provider_generation': 0},
        'inventories': lambda: {'resource_provider_generation': 0,
                                'inventories': {'VCPU': {'total': 8}}},
        'aggregates': lambda: {'resource_provider_generation': 0,
                               'aggregates': []},
        'traits': lambda: {'resource_provider_generation': 0,
                           'traits': []},
    }[kind]()


@pytest.fixture(scope='module')
def servers(keystone, placement_factory):
    """One server per mode, with one provider (8 VCPU) made by nova."""
    out = {}
    for mode, policy in MODES.items():
        server = placement_factory(policy=policy)
        token = keystone.token('nova')
        rp = str(uuid.uuid4())
        resp = kc.call(server, 'POST', '/resource_providers', token,
                       json={'name': 'matrix-rp', 'uuid': rp})
        assert resp.status_code == 200, resp.text
        resp = kc.call(server, 'PUT', '/resource_providers/%s/inventories'
                       % rp, token, json={
                           'resource_provider_generation': 0,
                           'inventories': {'VCPU': {'total': 8}}})
        assert resp.status_code == 200, resp.text
        out[mode] = (server, rp)
    return out


def _row(keystone, server, rp, method, path, body):
    cells = []
    for persona in PERSONAS:
        fill = {'rp': rp, 'missing': MISSING, 'new_uuid': uuid.uuid4(),
                'demo': keystone.projects['demo'],
                'alt': keystone.projects['alt'], 'new_rc': _custom(),
                'new_trait': _custom()}
        resp = kc.call(server, method, path.format(**fill),
                       keystone.token(persona), json=_body(body))
        cells.append(str(resp.status_code))
    return ' '.join(cells)


@pytest.mark.parametrize('mode', list(MODES))
@pytest.mark.parametrize('method,path,body,legacy,secure', MATRIX,
                         # gabbi's pytest plugin claims any id with a colon
                         ids=['%s %s' % (m[0], m[1].replace(':', '='))
                              for m in MATRIX])
def test_matrix(keystone, servers, mode, method, path, body, legacy,
                secure):
    server, rp = servers[mode]
    expected = legacy if mode == 'legacy' else secure
    got = _row(keystone, server, rp, method, path, body)
    assert got == expected, (
        '%s %s under %s\n  personas %s\n  expected %s\n  got      %s'
        % (method, path, mode, ' '.join(PERSONAS), expected, got))


def test_matrix_size():
    """The table's coverage, so a dropped row shows up: 37 requests, 7
    personas, 2 policy modes."""
    assert (len(MATRIX), len(PERSONAS), len(MODES)) == (37, 7, 2)
