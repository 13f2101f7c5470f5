"""OneBot v11 (QQ through NapCat, LLOneBot, Lagrange): see README.md beside this file."""
