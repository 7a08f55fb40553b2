"""The agent definition: the model of its graph and node types, CEL conditions and their cost
bound, sensitive variables, waits ahead.
"""
