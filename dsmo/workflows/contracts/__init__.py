"""What a run exchanges with its activities and shows the world: activity inputs and outputs, run
records, audit-trail segments.
"""
