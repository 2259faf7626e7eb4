"""The kill matrix (issue 36): each framework's documented program SIGKILLed at each point of a turn.

``points`` says where a turn is killed, ``script`` what the scripted model answers and
what a strict provider accepts, ``harness`` runs a round (a killed process, then a new
one with a new user message) and judges it, ``programs`` holds one module per framework
program, each running the code block ``docs/integrations.md`` shows for it.
"""
