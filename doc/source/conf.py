"""Sphinx configuration of the documentation site (tools/build-docs).

The configuration and policy references and their samples are generated
from the code (oslo.config's and oslo.policy's Sphinx extensions, over
etc/placement/*-generator.conf), so they cannot fall behind it."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..'))
# The checkout's package, not whatever copy the environment has installed.
sys.path.insert(0, REPO)
# oslo.config's show-options reads its :config-file: from the working
# directory: the repository's root, wherever sphinx-build was started.
os.chdir(REPO)
# The generated samples go here; git keeps no empty directory, and Sphinx
# warns (an error under -W) about a missing html_static_path.
os.makedirs(os.path.join(HERE, '_static'), exist_ok=True)

project = 'openstack-placement-ng'
copyright = 'openstack-placement-ng authors; Apache-2.0'
extensions = [
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'oslo_policy.sphinxext',
    'oslo_policy.sphinxpolicygen',
]

# Paths are relative to this directory (the extensions join them to it).
config_generator_config_file = '../../etc/placement/config-generator.conf'
sample_config_basename = '_static/placement'
policy_generator_config_file = '../../etc/placement/policy-generator.conf'
sample_policy_basename = '_static/placement'

try:
    import openstackdocstheme  # noqa: F401
except ImportError:
    html_theme = 'alabaster'
else:
    extensions.append('openstackdocstheme')
    html_theme = 'openstackdocs'
    openstackdocs_repo_name = 'openstack-placement-ng'
    openstackdocs_use_storyboard = False
    openstackdocs_auto_name = False
    openstackdocs_pdf_link = False

master_doc = 'index'
exclude_patterns = ['_build']
html_static_path = ['_static']
pygments_style = 'sphinx'
# Literal blocks are shell sessions and configuration files, not Python.
highlight_language = 'none'
