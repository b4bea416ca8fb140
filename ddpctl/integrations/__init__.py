"""Bridges between ddpctl's stop handling and the trainers people bring (`hf`: Hugging Face Trainer). Each module
imports its trainer's library itself, so importing ddpctl never needs it."""
