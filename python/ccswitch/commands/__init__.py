"""The commands that compose the package's roles: `ccswitch run` and `ccswitch sweep` run
experiments (experiments/) and then analyse what they wrote (analysis/); experiments/ itself
never imports analysis/."""
