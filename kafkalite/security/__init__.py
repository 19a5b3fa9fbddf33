"""Security as Kafka does it: listeners' security protocols, TLS, SASL and principals.

Sans-IO where it can be: the SASL state machine (sasl_authenticator.py) and its mechanisms
(plain.py, scram.py) take frames and tokens and return what to send; only the server
(kafkalite/server.py) touches sockets. Nothing here imports the broker or the API layer.
"""
