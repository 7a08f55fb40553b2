# The DSMO worker image for docker-compose.yml (the embedded stack needs no Docker).
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY dsmo ./dsmo
# DSMO's examples, a distribution of their own: docker-compose.yml asks for them (DSMO_LOAD).
COPY examples/pyproject.toml ./examples/
COPY examples/dsmo_examples ./examples/dsmo_examples
RUN pip install --no-cache-dir . './examples[postgres]'
RUN useradd --create-home dsmo && mkdir -p /var/lib/dsmo/outbox && chown dsmo /var/lib/dsmo/outbox
USER dsmo
CMD ["python", "-m", "dsmo.worker"]
