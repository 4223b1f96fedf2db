"""An exported model read back and rebuilt in numpy, independently of the trainer.

safetensors_file reads a .safetensors file strictly, layers holds the numpy layers, models checks
a model's tensors and runs its forward pass, datasets reads the test sets; tools/check_model.py
scores a model with them.
"""
