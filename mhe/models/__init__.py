"""Models: bounded parameters, physics fields, neural residual, discretization, input hold, output map, their
CasADi form, and the plant physics other rooms build on (the racing car, the pendulums). The lowest room: it
imports no other room of mhe. Each module is imported by its path (`mhe.models.model`); `mhe` exports the public
names.
"""
