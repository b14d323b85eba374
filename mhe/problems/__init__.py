"""Problems: plants with the source of their recording and the builders of their identification problems
(the racing car, the pendulums, the DFKI torque pendulum, two tanks, the oscillator, EMPS). Builds on
`mhe.identification` and every room below it.
"""
