"""The seed's order saga on a real database: create order, reserve stock, pay, ship."""
