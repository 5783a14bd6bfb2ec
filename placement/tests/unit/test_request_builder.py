"""Parsing flavors and images, merging them, rendering the query
(placement_request.request): the client-side request builder."""
import urllib.parse

import pytest

from placement_request import exceptions
from placement_request import request as rq

AGG1 = '11111111-1111-4111-8111-111111111111'
AGG2 = '22222222-2222-4222-8222-222222222222'
AGG3 = '33333333-3333-4333-8333-333333333333'


def _id(value):
    """Test ids without ':' -- gabbi's pytest plugin takes any test name
    with a colon for one of its YAML tests. Sets sorted: every pytest-xdist
    worker must name a test alike."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    return str(value).replace(':', '.')[:40]


def decoded(req, version=rq.LATEST, limit=None):
    return urllib.parse.unquote(req.to_querystring(version, limit))


# -- flavor extra specs ----------------------------------------------------

def test_flavor_fields_seed_unnumbered_group():
    req = rq.ResourceRequest.from_flavor({}, vcpus=2, memory_mb=2048,
                                         disk_gb=20)
    assert req.unnumbered.resources == {
        'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}
    assert list(req.groups) == ['']


def test_unnumbered_resources_override_flavor_fields_and_zero_removes():
    req = rq.ResourceRequest.from_flavor(
        {'resources:VCPU': '4', 'resources:DISK_GB': '0',
         'resources:CUSTOM_MAGIC': '1'}, vcpus=2, memory_mb=512, disk_gb=10)
    assert req.unnumbered.resources == {
        'VCPU': 4, 'MEMORY_MB': 512, 'CUSTOM_MAGIC': 1}


def test_numbered_and_string_suffix_groups():
    req = rq.ResourceRequest.from_flavor({
        'resources1:SRIOV_NET_VF': '1', 'trait1:CUSTOM_PHYSNET_A': 'required',
        'resources_gpu:VGPU': '2', 'trait_gpu:CUSTOM_NVIDIA': 'forbidden',
        'group_policy': 'isolate'})
    assert set(req.groups) == {'1', '_gpu'}
    assert req.groups['1'].resources == {'SRIOV_NET_VF': 1}
    assert req.groups['1'].required_traits == {'CUSTOM_PHYSNET_A'}
    assert req.groups['_gpu'].forbidden_traits == {'CUSTOM_NVIDIA'}
    assert req.group_policy == 'isolate'


def test_unnumbered_traits_required_and_forbidden():
    req = rq.ResourceRequest.from_flavor({
        'trait:HW_CPU_X86_AVX2': 'required',
        'trait:CUSTOM_SLOW': 'forbidden'}, vcpus=1)
    assert req.unnumbered.required_traits == {'HW_CPU_X86_AVX2'}
    assert req.unnumbered.forbidden_traits == {'CUSTOM_SLOW'}


def test_unrelated_flavor_keys_are_ignored_as_nova_does():
    req = rq.ResourceRequest.from_flavor({
        'hw:cpu_policy': 'dedicated',
        'aggregate_instance_extra_specs:ssd': 'true',
        'quota:disk_read_bytes_sec': '10'}, vcpus=1)
    assert req.unnumbered.resources == {'VCPU': 1}
    assert list(req.groups) == ['']


def test_numbered_group_zeroed_out_disappears():
    req = rq.ResourceRequest.from_flavor({'resources1:VGPU': '0'}, vcpus=1)
    assert list(req.groups) == ['']


@pytest.mark.parametrize('key,value,fragment', [
    ('resources:VCPU', 'two', 'non-negative integer'),
    ('resources:VCPU', '-1', 'non-negative integer'),
    ('resources:VCPU', '1.5', 'non-negative integer'),
    ('resources:VCPU', '', 'non-negative integer'),
    ('resources:vcpu', '1', 'not a valid resource class name'),
    ('resources:', '1', 'not a valid resource class name'),
    ('resources1:CUSTOM-X', '1', 'not a valid resource class name'),
    ('trait:HW_CPU_X86_AVX2', 'yes', 'must be "required" or "forbidden"'),
    ('trait:HW_CPU_X86_AVX2', 'Required', 'must be "required" or'),
    ('trait:hw_cpu', 'required', 'not a valid trait name'),
    ('trait:', 'required', 'not a valid trait name'),
    ('trait1:', 'forbidden', 'not a valid trait name'),
    ('resources!:VCPU', '1', 'malformed key'),
    ('trait' + 'x' * 65 + ':FOO', 'required', 'malformed key'),
    ('group_policy', 'strict', 'must be one of none, isolate'),
    ('group_policy', '', 'must be one of none, isolate'),
], ids=_id)
def test_invalid_flavor_spec_names_the_key(key, value, fragment):
    with pytest.raises(exceptions.InvalidSpec) as err:
        rq.ResourceRequest.from_flavor({key: value}, vcpus=1)
    assert err.value.key == key
    assert repr(key) in str(err.value)
    assert 'flavor extra spec' in str(err.value)
    assert fragment in str(err.value)


def test_invalid_flavor_field_amount():
    with pytest.raises(exceptions.InvalidSpec) as err:
        rq.ResourceRequest.from_flavor({}, vcpus=-2)
    assert err.value.key == 'vcpus'
    assert str(err.value).startswith("Invalid flavor field 'vcpus'")


# -- image properties ------------------------------------------------------

def test_image_required_traits():
    image = rq.parse_image_properties({
        'trait:HW_CPU_X86_AVX2': 'required',
        'trait:CUSTOM_TRUSTED_HOST': 'required',
        'hw_disk_bus': 'scsi', 'os_distro': 'ubuntu'})
    assert image.required == {'HW_CPU_X86_AVX2', 'CUSTOM_TRUSTED_HOST'}
    assert image.warnings == []


def test_image_numbered_traits_ignored_with_warning(caplog):
    image = rq.parse_image_properties({
        'trait1:CUSTOM_FOO': 'required', 'trait_x:CUSTOM_BAR': 'required',
        'trait:CUSTOM_OK': 'required'})
    assert image.required == {'CUSTOM_OK'}
    assert len(image.warnings) == 2
    assert any('trait1:CUSTOM_FOO' in w for w in image.warnings)
    assert 'only the unnumbered' in image.warnings[0]
    assert 'trait1:CUSTOM_FOO' in caplog.text


def test_image_resources_properties_are_not_ours():
    image = rq.parse_image_properties({'resources:VCPU': '8'})
    assert image.required == set()


@pytest.mark.parametrize('key,value,fragment', [
    ('trait:CUSTOM_X', 'forbidden', 'only valid value'),
    ('trait:CUSTOM_X', 'yes', 'only valid value'),
    ('trait:CUSTOM_X', '', 'only valid value'),
    ('trait:custom_x', 'required', 'not a valid trait name'),
    ('trait:', 'required', 'not a valid trait name'),
    ('trait!:CUSTOM_X', 'required', 'malformed trait key'),
], ids=_id)
def test_invalid_image_property_names_the_key(key, value, fragment):
    with pytest.raises(exceptions.InvalidSpec) as err:
        rq.parse_image_properties({key: value})
    assert err.value.key == key
    assert 'image property' in str(err.value)
    assert fragment in str(err.value)


def test_numbered_image_trait_with_bad_value_is_only_a_warning():
    # The key is ignored as a whole, so its value is never judged.
    image = rq.parse_image_properties({'trait1:CUSTOM_X': 'forbidden'})
    assert image.required == set() and len(image.warnings) == 1


# -- merging ---------------------------------------------------------------

def test_image_traits_union_with_flavor_unnumbered_traits():
    flavor = rq.ResourceRequest.from_flavor(
        {'trait:HW_CPU_X86_AVX2': 'required', 'resources1:VGPU': '1',
         'trait1:CUSTOM_GPU_A': 'required'}, vcpus=2)
    merged = flavor.with_image({'trait:CUSTOM_TRUSTED_HOST': 'required',
                                'trait:HW_CPU_X86_AVX2': 'required'})
    assert merged.unnumbered.required_traits == {
        'HW_CPU_X86_AVX2', 'CUSTOM_TRUSTED_HOST'}
    # numbered groups untouched, and the flavor request itself unchanged
    assert merged.groups['1'].required_traits == {'CUSTOM_GPU_A'}
    assert flavor.unnumbered.required_traits == {'HW_CPU_X86_AVX2'}


def test_image_trait_forbidden_by_flavor_is_a_conflict():
    flavor = rq.ResourceRequest.from_flavor(
        {'trait:CUSTOM_TRUSTED_HOST': 'forbidden',
         'trait:CUSTOM_B': 'forbidden'}, vcpus=1)
    with pytest.raises(exceptions.TraitConflict) as err:
        flavor.with_image({'trait:CUSTOM_TRUSTED_HOST': 'required',
                           'trait:CUSTOM_B': 'required',
                           'trait:CUSTOM_C': 'required'})
    assert err.value.traits == ['CUSTOM_B', 'CUSTOM_TRUSTED_HOST']
    assert 'trait:CUSTOM_TRUSTED_HOST=forbidden' in str(err.value)


def test_image_trait_forbidden_only_in_numbered_group_is_not_a_conflict():
    flavor = rq.ResourceRequest.from_flavor(
        {'resources1:SRIOV_NET_VF': '1', 'trait1:CUSTOM_X': 'forbidden'},
        vcpus=1)
    merged = flavor.with_image({'trait:CUSTOM_X': 'required'})
    assert merged.unnumbered.required_traits == {'CUSTOM_X'}
    assert merged.groups['1'].forbidden_traits == {'CUSTOM_X'}


def test_merge_carries_image_warnings():
    merged = rq.build_request({}, {'trait2:CUSTOM_X': 'required'}, vcpus=1)
    assert len(merged.warnings) == 1


def test_image_traits_with_all_resources_in_numbered_groups():
    # The image's traits make a resourceless unnumbered group, which only
    # 1.36 can express.
    req = rq.build_request({'resources1:VCPU': '1'},
                           {'trait:CUSTOM_X': 'required'})
    assert decoded(req, '1.36') == (
        'required=CUSTOM_X&resources1=VCPU:1')
    with pytest.raises(exceptions.UnsupportedByMicroversion) as err:
        req.to_querystring('1.35')
    assert err.value.feature == 'request groups without resources'


# -- aggregates ------------------------------------------------------------

@pytest.mark.parametrize('value,forbidden,aggs', [
    (AGG1, False, {AGG1}),
    ('in:%s,%s' % (AGG1, AGG2), False, {AGG1, AGG2}),
    ('!' + AGG1, True, {AGG1}),
    ('!in:%s,%s' % (AGG1, AGG2), True, {AGG1, AGG2}),
], ids=_id)
def test_parse_member_of(value, forbidden, aggs):
    assert rq.parse_member_of(value) == (forbidden, aggs)


@pytest.mark.parametrize('value,fragment', [
    ('in:%s,!%s' % (AGG1, AGG2), '"!" is not allowed inside'),
    ('%s,%s' % (AGG1, AGG2), 'needs the "in:" prefix'),
    ('not-a-uuid', 'is not an aggregate UUID'),
    ('', 'is not an aggregate UUID'),
    ('!', 'is not an aggregate UUID'),
    ('in:', 'is not an aggregate UUID'),
], ids=_id)
def test_invalid_member_of_names_the_argument(value, fragment):
    with pytest.raises(exceptions.InvalidSpec) as err:
        rq.parse_member_of(value, key='--member-of')
    assert err.value.key == '--member-of'
    assert fragment in str(err.value)


def test_member_of_rendering_required_and_forbidden():
    req = rq.build_request({}, {}, vcpus=1, member_of=[
        'in:%s,%s' % (AGG2, AGG1), AGG3, '!' + AGG1, '!in:' + AGG2])
    assert decoded(req) == (
        'member_of=!in:{a1},{a2}&member_of=in:{a1},{a2}&member_of=in:{a3}'
        '&resources=VCPU:1'.format(a1=AGG1, a2=AGG2, a3=AGG3))


def test_numbered_member_of():
    req = rq.ResourceRequest.from_flavor({'resources1:VGPU': '1'}, vcpus=1)
    req.add_member_of_spec(AGG1, suffix='1')
    assert decoded(req) == (
        'member_of1=in:%s&resources=VCPU:1&resources1=VGPU:1' % AGG1)


def test_invalid_group_suffix():
    req = rq.ResourceRequest()
    with pytest.raises(exceptions.InvalidSpec) as err:
        req.add_member_of([AGG1], suffix='bad suffix')
    assert err.value.key == 'bad suffix'


# -- rendering -------------------------------------------------------------

def test_exact_query_string_as_nova_encodes_it():
    req = rq.build_request(
        {'trait:HW_CPU_X86_AVX2': 'required',
         'trait:CUSTOM_SLOW': 'forbidden'},
        {'trait:CUSTOM_TRUSTED_HOST': 'required'},
        vcpus=2, memory_mb=2048, disk_gb=20)
    assert req.to_querystring('1.39', limit=10) == (
        'limit=10'
        '&required=CUSTOM_TRUSTED_HOST%2CHW_CPU_X86_AVX2%2C%21CUSTOM_SLOW'
        '&resources=DISK_GB%3A20%2CMEMORY_MB%3A2048%2CVCPU%3A2')


def test_granular_query_string():
    req = rq.build_request({
        'resources1:SRIOV_NET_VF': '1', 'trait1:CUSTOM_PHYSNET_A': 'required',
        'resources2:SRIOV_NET_VF': '1', 'trait2:CUSTOM_PHYSNET_B': 'required',
        'group_policy': 'isolate'}, {}, vcpus=1)
    assert decoded(req, '1.25') == (
        'group_policy=isolate&required1=CUSTOM_PHYSNET_A'
        '&required2=CUSTOM_PHYSNET_B&resources=VCPU:1'
        '&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1')


@pytest.mark.parametrize('specs,member_of,limit,version,feature', [
    ({}, [], None, '1.9', 'GET /allocation_candidates'),
    ({}, [], 5, '1.15', 'limit'),
    ({'trait:CUSTOM_X': 'required'}, [], None, '1.16', 'required traits'),
    ({'trait:CUSTOM_X': 'forbidden'}, [], None, '1.21', 'forbidden traits'),
    ({}, [AGG1], None, '1.20', 'member_of'),
    ({}, [AGG1, AGG2], None, '1.23',
     'more than one member_of in a request group'),
    ({'resources1:VGPU': '1'}, [], None, '1.24', 'numbered request groups'),
    ({'group_policy': 'none'}, [], None, '1.24', 'group_policy'),
    ({}, ['!' + AGG1], None, '1.31', 'forbidden aggregates (member_of=!...)'),
    ({'resources_a:VGPU': '1'}, [], None, '1.32',
     'non-numeric request group suffixes'),
    ({'resources01:VGPU': '1'}, [], None, '1.32',
     'non-numeric request group suffixes'),
    ({'trait1:CUSTOM_X': 'required'}, [], None, '1.35',
     'request groups without resources'),
    ({'root': '!COMPUTE_STATUS_DISABLED'}, [], None, '1.34',
     'root_required'),
], ids=_id)
def test_features_refused_below_their_microversion(
        specs, member_of, limit, version, feature):
    specs = dict(specs)
    root = specs.pop('root', None)
    req = rq.build_request(specs, {}, vcpus=1, member_of=member_of)
    if root:
        req.add_root_trait(root)
    with pytest.raises(exceptions.UnsupportedByMicroversion) as err:
        req.to_querystring(version, limit)
    assert err.value.feature == feature
    assert 'needs placement microversion' in str(err.value)
    # ... and accepted from the lowest version that has every feature used.
    needed = req.needed_microversion(limit)
    assert needed >= rq.NEEDS[feature]
    req.validate(rq.format_version(needed), limit)


def test_needed_microversion():
    assert rq.build_request({}, {}, vcpus=1).needed_microversion() == (1, 10)
    req = rq.build_request({'trait:HW_CPU_X86_AVX2': 'required'},
                           {'trait:CUSTOM_TRUSTED_HOST': 'required'}, vcpus=1)
    assert req.needed_microversion() == (1, 17)
    assert req.needed_microversion(limit=3) == (1, 17)


def test_more_than_one_numbered_group_needs_group_policy():
    req = rq.build_request({'resources1:VGPU': '1',
                            'resources2:VGPU': '1'}, {}, vcpus=1)
    with pytest.raises(exceptions.InvalidSpec) as err:
        req.to_querystring()
    assert err.value.key == 'group_policy'
    assert '(1, 2)' in str(err.value)


def test_request_without_resources_is_refused():
    req = rq.build_request({}, {'trait:CUSTOM_X': 'required'})
    with pytest.raises(exceptions.InvalidSpec) as err:
        req.to_querystring()
    assert err.value.key == 'resources'


@pytest.mark.parametrize('limit', [0, -1, '5', 2.5])
def test_bad_limit(limit):
    req = rq.build_request({}, {}, vcpus=1)
    with pytest.raises(exceptions.InvalidSpec) as err:
        req.to_querystring(limit=limit)
    assert err.value.key == 'limit'


@pytest.mark.parametrize('text,version', [
    ('1.25', (1, 25)), ((1, 3), (1, 3)), ('latest', rq.LATEST),
    (None, rq.LATEST), (' 1.39 ', (1, 39))])
def test_parse_version(text, version):
    assert rq.parse_version(text) == version


@pytest.mark.parametrize('text', ['1', '1.x', 'one.two', '01.2', ''])
def test_parse_version_refuses_garbage(text):
    with pytest.raises(ValueError):
        rq.parse_version(text)


def test_root_required_as_nova_sends_it():
    req = rq.build_request({}, {}, vcpus=1)
    req.add_root_trait('!COMPUTE_STATUS_DISABLED')
    req.add_root_trait('CUSTOM_ROOT')
    assert decoded(req, '1.35') == (
        'resources=VCPU:1&root_required=CUSTOM_ROOT,!COMPUTE_STATUS_DISABLED')


@pytest.mark.parametrize('first,second,fragment', [
    ('CUSTOM_A', '!CUSTOM_A', 'both required and forbidden'),
    ('!CUSTOM_A', 'CUSTOM_A', 'both required and forbidden'),
    ('CUSTOM_A', '!bad', 'not a valid trait name'),
    ('CUSTOM_A', '', 'not a valid trait name'),
])
def test_invalid_root_required(first, second, fragment):
    req = rq.build_request({}, {}, vcpus=1)
    req.add_root_trait(first)
    with pytest.raises(exceptions.InvalidSpec) as err:
        req.add_root_trait(second, key='--root-required')
    assert err.value.key == '--root-required'
    assert fragment in str(err.value)
