"""Bridges between ddpctl's stop handling and the trainers people bring (`hf`: Hugging Face Trainer, `lightning`:
Lightning's Trainer). Each module imports its trainer's library itself, so importing ddpctl never needs it."""
