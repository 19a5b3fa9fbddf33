"""`kafkalite console`: a web console for any Kafka-compatible cluster.

A separate process: Starlette + uvicorn serve a plain HTML/JS page (static/) and a JSON API
(app.py) that talks to the cluster through confluent-kafka (cluster.py), as any client would.
"""
