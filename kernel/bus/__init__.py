"""The bus: the broker that routes requests to workers, and the tables it routes by.

``broker`` is the loop that reads envelopes and sends each one on; ``jobs`` is the table of requests in
flight with their deadlines; ``members`` is a worker in routing, its measured speed and the choice of the
member that will be done first; ``membership`` is what the broker asks of the supervisor and of the registry
of remote members; ``identities`` names the peers on the two sockets (the constants, as in the ZeroMQ
Guide's MDP.py).
"""
