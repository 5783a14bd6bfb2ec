"""placement-request: build, send and check scheduling requests.

  placement-request candidates --flavor-spec K=V ... --image-prop K=V ...
      [--vcpus N] [--memory-mb N] [--disk-gb N] [--member-of AGG ...]
      [--root-required [!]TRAIT ...] [--limit N] [--format table|json]
      [--query-only]
      [--claim CONSUMER --project-id P --user-id U [--candidate N]]
  placement-request rebuild-check --consumer UUID --image-prop K=V ...

Authentication as the service's two modes: ``--token admin`` (noauth2),
or keystone: ``--os-token``/``OS_TOKEN`` with ``--placement-url``, or
``--os-auth-url``/``--os-username``/``--os-password``/``--os-project-name``
(the placement URL then comes from the catalog).

Exit status: 0 success / rebuild check passed, 1 rebuild check failed,
2 invalid input, 3 placement or connection error.
"""
import argparse
import json
import os
import sys
import urllib.parse

import requests

from placement_request import client as pr_client
from placement_request import exceptions
from placement_request import rebuild
from placement_request import request as rq

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_INVALID = 2
EXIT_PLACEMENT_ERROR = 3


def _env(*names, default=None):
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return default


def _pairs(values, option):
    """['K=V', ...] -> {K: V}; the value may itself contain '='."""
    result = {}
    for item in values or []:
        key, sep, value = item.partition('=')
        key = key.strip()
        if not sep or not key:
            raise exceptions.InvalidSpec(
                item, 'expected KEY=VALUE', source='%s argument' % option)
        if key in result:
            raise exceptions.InvalidSpec(
                key, 'given more than once', source='%s argument' % option)
        result[key] = value.strip()
    return result


def _auth_options():
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group('placement and authentication')
    group.add_argument(
        '--placement-url', default=_env('PLACEMENT_URL',
                                        'OS_PLACEMENT_ENDPOINT'),
        help='placement endpoint, e.g. http://127.0.0.1:8778 '
             '(env PLACEMENT_URL); found in the keystone catalog when '
             'using --os-auth-url')
    group.add_argument(
        '--auth-strategy', choices=('noauth2', 'keystone'),
        help='as the service\'s [api] auth_strategy; guessed from the '
             'other options when not given')
    group.add_argument(
        '--token', default=_env('PLACEMENT_NOAUTH_TOKEN'),
        help='noauth2: the token to send, "admin" or "USER:PROJECT"')
    group.add_argument('--os-token', default=_env('OS_TOKEN'),
                       help='keystone: a pre-issued token (env OS_TOKEN)')
    group.add_argument('--os-auth-url', default=_env('OS_AUTH_URL'))
    group.add_argument('--os-username', default=_env('OS_USERNAME'))
    group.add_argument('--os-password', default=_env('OS_PASSWORD'))
    group.add_argument('--os-project-name', default=_env('OS_PROJECT_NAME'))
    group.add_argument('--os-project-id', default=_env('OS_PROJECT_ID'))
    group.add_argument('--os-user-domain-name', default=_env(
        'OS_USER_DOMAIN_NAME', default='Default'))
    group.add_argument('--os-project-domain-name', default=_env(
        'OS_PROJECT_DOMAIN_NAME', default='Default'))
    group.add_argument('--os-region-name', default=_env('OS_REGION_NAME'))
    group.add_argument('--os-interface', default=_env(
        'OS_INTERFACE', default='public'))
    group.add_argument(
        '--os-placement-api-version',
        default=_env('OS_PLACEMENT_API_VERSION'),
        help='microversion to use (default: the newest both sides speak); '
             'features it lacks are refused')
    group.add_argument('--timeout', type=float, default=60)
    group.add_argument('--format', choices=('table', 'json'),
                       default='table')
    return parser


def build_parser():
    common = _auth_options()
    parser = argparse.ArgumentParser(
        prog='placement-request',
        description='Build nova-style allocation candidate requests from '
                    'flavor extra specs and image traits, and check image '
                    'traits before a rebuild, against any placement.')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True

    cand = sub.add_parser(
        'candidates', parents=[common],
        help='print the GET /allocation_candidates query and its answer')
    cand.add_argument('--flavor-spec', action='append', default=[],
                      metavar='KEY=VALUE',
                      help='flavor extra spec, e.g. '
                           'trait:HW_CPU_X86_AVX2=required (repeatable)')
    cand.add_argument('--image-prop', action='append', default=[],
                      metavar='KEY=VALUE',
                      help='image property, e.g. '
                           'trait:CUSTOM_TRUSTED_HOST=required (repeatable)')
    cand.add_argument('--vcpus', default='0', help='flavor vcpus')
    cand.add_argument('--memory-mb', default='0', help='flavor memory_mb')
    cand.add_argument('--disk-gb', default='0',
                      help='flavor root + ephemeral + swap disk, in GB')
    cand.add_argument('--member-of', action='append', default=[],
                      metavar='AGG',
                      help='aggregate constraint for the unnumbered group: '
                           'UUID, in:UUID,UUID, !UUID or !in:UUID,UUID '
                           '(repeatable)')
    cand.add_argument('--root-required', action='append', default=[],
                      metavar='[!]TRAIT',
                      help='trait the root provider must have (or, with !, '
                           'lack), e.g. !COMPUTE_STATUS_DISABLED as nova '
                           'adds it (repeatable; microversion 1.35)')
    cand.add_argument('--limit', type=int,
                      help='ask for at most N candidates')
    cand.add_argument('--query-only', action='store_true',
                      help='print the query without asking placement')
    cand.add_argument('--claim', metavar='CONSUMER_UUID',
                      help='write the chosen candidate\'s allocations for '
                           'this consumer')
    cand.add_argument('--candidate', type=int, default=1,
                      help='which candidate to claim, counting from 1')
    cand.add_argument('--project-id', help='project of the claim')
    cand.add_argument('--user-id', help='user of the claim')
    cand.add_argument('--consumer-type', default='INSTANCE')

    check = sub.add_parser(
        'rebuild-check', parents=[common],
        help='check a new image\'s traits against a consumer\'s current '
             'allocations; exits 1 when traits are missing')
    check.add_argument('--consumer', required=True, metavar='UUID')
    check.add_argument('--image-prop', action='append', default=[],
                       metavar='KEY=VALUE')
    return parser


def make_client(args, session=None):
    """A PlacementClient from the auth options."""
    strategy = args.auth_strategy
    if strategy is None:
        strategy = ('noauth2' if args.token and not (
            args.os_token or args.os_auth_url) else 'keystone')
    endpoint = args.placement_url
    if strategy == 'noauth2':
        token = args.token or 'admin'
    elif args.os_token:
        token = args.os_token
    elif args.os_auth_url:
        token, catalog_url = pr_client.keystone_token(
            args.os_auth_url, username=args.os_username,
            password=args.os_password, project_name=args.os_project_name,
            project_id=args.os_project_id,
            user_domain_name=args.os_user_domain_name,
            project_domain_name=args.os_project_domain_name,
            region_name=args.os_region_name, interface=args.os_interface)
        endpoint = endpoint or catalog_url
    else:
        raise exceptions.InvalidSpec(
            '--auth-strategy', 'keystone needs --os-token (or OS_TOKEN) or '
            '--os-auth-url with a username and password; for a noauth2 '
            'service give --token admin', source='argument')
    if not endpoint:
        raise exceptions.InvalidSpec(
            '--placement-url', 'no placement endpoint: give --placement-url '
            '(or PLACEMENT_URL)', source='argument')
    return pr_client.PlacementClient(
        endpoint, token=token, microversion=args.os_placement_api_version,
        session=session, timeout=args.timeout)


def _table(headers, rows):
    widths = [max([len(h)] + [len(r[i]) for r in rows])
              for i, h in enumerate(headers)]
    lines = ['  '.join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append('  '.join('-' * w for w in widths))
    for row in rows:
        lines.append('  '.join(c.ljust(w) for c, w in zip(row, widths)))
    return '\n'.join(line.rstrip() for line in lines)


def _candidate_rows(cands):
    rows = []
    for index in range(len(cands)):
        providers = cands.providers(index)
        for rp, resources in sorted(providers.items()):
            summary = cands.provider_summaries.get(rp, {})
            rows.append([
                str(index + 1),
                summary.get('root_provider_uuid') or rp, rp,
                ', '.join('%s=%s' % kv for kv in sorted(resources.items())),
                ', '.join(sorted(summary.get('traits', [])))])
    return rows


def _build(args):
    req = rq.ResourceRequest.from_flavor(
        _pairs(args.flavor_spec, '--flavor-spec'), vcpus=args.vcpus,
        memory_mb=args.memory_mb, disk_gb=args.disk_gb)
    for value in args.member_of:
        req.add_member_of_spec(value, key='--member-of %s' % value)
    for value in args.root_required:
        req.add_root_trait(value, key='--root-required %s' % value)
    return req.with_image(rq.parse_image_properties(
        _pairs(args.image_prop, '--image-prop')))


def do_candidates(args, out, err, session=None):
    req = _build(args)
    for warning in req.warnings:
        print('WARNING: %s' % warning, file=err)
    if args.query_only:
        version = rq.parse_version(args.os_placement_api_version
                                   or req.needed_microversion(args.limit))
        query = req.to_querystring(version, args.limit)
        if args.format == 'json':
            json.dump({'query': query,
                       'microversion': rq.format_version(version)},
                      out, indent=2, sort_keys=True)
            out.write('\n')
        else:
            print('GET /allocation_candidates?%s' % query, file=out)
            print('microversion: %s' % rq.format_version(version), file=out)
        return EXIT_OK
    client = make_client(args, session)
    cands = client.get_allocation_candidates(req, limit=args.limit)
    claimed = None
    if args.claim:
        if not (args.project_id and args.user_id):
            raise exceptions.InvalidSpec(
                '--claim', 'needs --project-id and --user-id',
                source='argument')
        if not 1 <= args.candidate <= len(cands):
            raise exceptions.InvalidSpec(
                '--candidate', 'there are %d candidate(s), asked for #%d'
                % (len(cands), args.candidate), source='argument')
        client.claim(args.claim, cands, args.candidate - 1, args.project_id,
                     args.user_id, consumer_type=args.consumer_type)
        claimed = cands.providers(args.candidate - 1)
    if args.format == 'json':
        body = cands.as_dict()
        if claimed is not None:
            body['claimed'] = {'consumer_uuid': args.claim,
                               'allocations': claimed}
        json.dump(body, out, indent=2, sort_keys=True)
        out.write('\n')
        return EXIT_OK
    print('GET /allocation_candidates?%s' % cands.query, file=out)
    print('  (decoded: %s; microversion %s)' % (
        urllib.parse.unquote(cands.query),
        rq.format_version(cands.microversion)), file=out)
    if not len(cands):
        print('No allocation candidates.', file=out)
    else:
        print('%d candidate(s):' % len(cands), file=out)
        print(_table(['#', 'ROOT PROVIDER', 'PROVIDER', 'RESOURCES',
                      'TRAITS'], _candidate_rows(cands)), file=out)
    if claimed is not None:
        print('Claimed candidate #%d for consumer %s.' % (
            args.candidate, args.claim), file=out)
    return EXIT_OK


def do_rebuild_check(args, out, err, session=None):
    image = rq.parse_image_properties(_pairs(args.image_prop, '--image-prop'))
    for warning in image.warnings:
        print('WARNING: %s' % warning, file=err)
    client = make_client(args, session)
    result = rebuild.rebuild_check(client, args.consumer, image)
    if args.format == 'json':
        json.dump(result.as_dict(), out, indent=2, sort_keys=True)
        out.write('\n')
    else:
        print(result.explain(), file=out)
        if result.provider_traits:
            print(_table(['PROVIDER', 'TRAITS'], [
                [rp, ', '.join(sorted(traits))] for rp, traits in
                sorted(result.provider_traits.items())]), file=out)
    return EXIT_OK if result.passed else EXIT_CHECK_FAILED


COMMANDS = {'candidates': do_candidates, 'rebuild-check': do_rebuild_check}


def main(argv=None, session=None, out=None, err=None):
    """Entry point. ``session`` lets tests route HTTP to an in-process
    app; ``out``/``err`` default to stdout/stderr."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args, out, err, session=session)
    except (exceptions.InvalidSpec, exceptions.TraitConflict,
            exceptions.UnsupportedByMicroversion, ValueError) as exc:
        print('ERROR: %s' % exc, file=err)
        return EXIT_INVALID
    except exceptions.RequestBuilderError as exc:
        print('ERROR: %s' % exc, file=err)
        return EXIT_PLACEMENT_ERROR
    except requests.RequestException as exc:
        print('ERROR: cannot reach placement: %s' % exc, file=err)
        return EXIT_PLACEMENT_ERROR


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
