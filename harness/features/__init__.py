"""Features and class embeddings made by the harness itself, frozen and hashed.

- :mod:`~harness.features.sets`: the frozen artifact-set format both write;
- :mod:`~harness.features.images`: which images (a folder of class folders, or a list);
- :mod:`~harness.features.preprocess`: declared preprocessing and its transform;
- :mod:`~harness.features.backbones`: torchvision backbones, hashed weights, the layer read;
- :mod:`~harness.features.extract`: `zsl features extract`, resumable;
- :mod:`~harness.features.embeddings`: `zsl embeddings build` from class names and glosses;
- :mod:`~harness.features.clip`: open_clip image towers and clip-text prompt embeddings.

torch, torchvision and the text models are the optional ``features`` extra, imported only when
something is extracted or embedded.
"""
